"""Conformance runner for service protocol 1 (csi-sanity style): sets up a run, runs the
suite's checks in order, and leaves nothing behind.

It is destructive on purpose (the checks start, stop and destroy): point it at a test
installation. It runs the executable exactly as the agent does (the same environment, cwd
the bundle root, the manifest's names and timeouts when ``--bundle`` holds one), with a
throw-away data directory unless ``--data`` is given, and leaves nothing running: at the
end it stops the service, force-destroys every object it reported, and kills (and reports)
what a broken module left behind.

The checks themselves are :mod:`~oarbank_protocol.conformance.suite`; a check whose
prerequisite did not pass is skipped, and ``--spec-only`` skips the srt-schema ones.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from oarbank_protocol.conformance.checks import SRT_SCHEMA, Check, CheckFailed, CheckSkipped
from oarbank_protocol.conformance.options import RunnerOptions
from oarbank_protocol.conformance.processes import ModuleProcesses
from oarbank_protocol.conformance.session import ModuleSession
from oarbank_protocol.conformance.suite import CHECK_BY_ID, CHECKS, ProtocolChecks
from oarbank_protocol.errors import DocumentError, ExecError
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.execution.executor import ExecResult, Executor
from oarbank_protocol.execution.sandbox import approved_part, resolve

# What the CLI, the reports and callers import from here, wherever it is defined.
__all__ = [
    "CHECKS",
    "CHECK_BY_ID",
    "CheckResult",
    "ConformanceRunner",
    "Outcome",
    "RunnerOptions",
]

Outcome = Literal["pass", "fail", "skip"]


@dataclass
class CheckResult:
    check: Check
    outcome: Outcome
    message: str = ""
    duration_s: float = 0.0


class ConformanceRunner:
    """Runs the checks in order; a check whose prerequisite did not pass is skipped."""

    def __init__(self, exec_argv: Sequence[str], options: RunnerOptions | None = None) -> None:
        self.exec_argv = list(exec_argv)
        self.options = options or RunnerOptions()
        self.results: list[CheckResult] = []
        self.notes: list[str] = []
        self.session: ModuleSession | None = None

    @property
    def runs(self) -> list[ExecResult]:
        """Every op run so far."""
        return self.session.runs if self.session is not None else []

    def run(self) -> list[CheckResult]:
        opts = self.options
        temp: str | None = None
        data_dir = opts.data_dir
        if data_dir is None:
            temp = tempfile.mkdtemp(prefix="oarbank-conformance-")
            data_dir = Path(temp)
        context_kwargs: dict[str, Any] = {}
        if opts.platform:
            context_kwargs["platform"] = opts.platform
        if opts.sandbox is not None:
            # confined with what the site approves and nothing else: SP-035 names the rest,
            # and a module that really needs it fails where it reaches for it
            granted = approved_part(opts.sandbox, opts.site, opts.tools)
            context_kwargs["confinement"] = resolve(
                opts.module,
                granted,
                replace(opts.site, allow_unconfined=True),
                bundle_root=opts.bundle_root.resolve(),
                data_dir=data_dir.resolve(),
                tools=opts.tools,
            )
            context_kwargs["tools"] = {name: opts.tools[name] for name in granted.tools}
        context = ExecContext(
            bundle_root=opts.bundle_root.resolve(),
            module=opts.module,
            node_id=opts.node_id,
            data_dir=data_dir.resolve(),
            settings=opts.settings,
            **context_kwargs,
        )
        procs = ModuleProcesses(context.data_dir)
        try:
            executor = Executor(
                self.exec_argv, context, service=opts.service, timeouts=opts.timeouts
            )
            self.session = ModuleSession(executor, procs, opts)
            suite = ProtocolChecks(self.session, opts)
            for item in CHECKS:
                if opts.probe and not item.probe:
                    continue
                self._check(item, suite)
        finally:
            self._clean_up()
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        return self.results

    def _outcome(self, item: Check) -> Outcome | None:
        for result in self.results:
            if result.check is item:
                return result.outcome
        return None

    def _check(self, item: Check, suite: ProtocolChecks) -> None:
        began = time.monotonic()
        if self.options.spec_only and item.source == SRT_SCHEMA:
            self.results.append(CheckResult(item, "skip", "srt schema check (--spec-only)"))
            return
        failed_needs = [n.id for n in item.needs if self._outcome(n) != "pass"]
        if failed_needs:
            self.results.append(
                CheckResult(item, "skip", f"prerequisite {', '.join(failed_needs)} did not pass")
            )
            return
        outcome: Outcome = "pass"
        try:
            note = item(suite) or ""
        except CheckSkipped as exc:
            outcome, note = "skip", str(exc)
        except (CheckFailed, ExecError, DocumentError) as exc:
            outcome, note = "fail", str(exc)
        self.results.append(CheckResult(item, outcome, note, time.monotonic() - began))

    def _clean_up(self) -> None:
        """Leave nothing behind (a probe starts nothing, so there is nothing to clean)."""
        if self.session is None or self.options.probe:
            return
        killed = self.session.clean_up()
        if killed:
            self.notes.append("killed what the module left running: " + "; ".join(killed[:5]))
