"""Conformance runner for service protocol 1 (csi-sanity style).

``python -m srt_oarbank.conformance [options] EXEC...`` runs every MUST of the spec against
an executable, one numbered check per requirement (``SP-001`` ...), and reports in plain
text, TAP (``--tap``) or JUnit XML (``--junit FILE``). Exit status 0 means every check
passed (skips allowed), 1 means at least one failed, 2 a usage error.

The runner is *destructive on purpose*: it starts and stops the service and destroys the
objects that ``start`` reports as created. Point it at a test installation. It runs the
executable exactly as the agent does (same environment, cwd = ``--bundle``, default the
current directory), with a throw-away data directory unless ``--data`` is given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from srt_oarbank.execution.environment import ExecContext, load_json_file
from srt_oarbank.execution.executor import DEFAULT_TIMEOUTS, ExecResult, Executor
from srt_oarbank.protocol.documents import (
    Document,
    ErrorDocument,
    Fingerprint,
    OpResult,
    OwnedList,
    OwnedObject,
    Status,
    parse_json_object,
    validate_document,
)
from srt_oarbank.protocol.errors import DocumentError, ExecError
from srt_oarbank.protocol.manifest import OPS

Outcome = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    probe: bool = False
    """Also applies to probes (executables that implement only fingerprint)."""


CHECKS: Final[tuple[Check, ...]] = (
    Check("SP-001", "fingerprint exits 0 and prints exactly one JSON object in UTF-8", probe=True),
    Check("SP-002", "fingerprint matches service-fingerprint-1 (services send `running`)", True),
    Check("SP-003", "fingerprint finishes within its timeout (5 s)", probe=True),
    Check("SP-004", "fingerprint is read-only: repeated calls change no state", probe=True),
    Check("SP-005", "status of a stopped service: Status document, running=false"),
    Check("SP-006", "ready of a stopped service: exit 0, Status document, ready=false"),
    Check("SP-007", "stop of a stopped service succeeds (idempotent)"),
    Check("SP-008", "start exits 0 with an OpResult within the start timeout"),
    Check("SP-009", "start of a running service succeeds without a second instance"),
    Check("SP-010", "ready becomes true within the readiness deadline"),
    Check("SP-011", "status while running: running=true; ready never without running"),
    Check("SP-012", "fingerprint.running is true while the service runs"),
    Check("SP-013", "list_owned exits 0 with an OwnedList within its timeout (5 s)"),
    Check("SP-014", "every owned object carries oarbank.attempt_id, oarbank.node, oarbank.service"),
    Check("SP-015", "list_owned finds every object start reported as created"),
    Check("SP-016", "destroy of an unknown id succeeds, repeatedly (idempotent)"),
    Check("SP-017", "destroy without --force of a busy object fails with an error document"),
    Check("SP-018", "destroy --force removes a busy object"),
    Check("SP-019", "destroy of an already destroyed id succeeds, repeatedly"),
    Check("SP-020", "stop exits 0 with an OpResult within the stop timeout"),
    Check("SP-021", "after stop: status, ready and fingerprint all say not running"),
    Check("SP-022", "stop again succeeds (idempotent)"),
    Check("SP-023", "an unknown operation fails (non-zero exit)"),
    Check("SP-024", "every non-zero exit prints an error document {code,msg} or nothing"),
    Check("SP-025", "no op leaves a process holding its stdout/stderr after it exits", True),
)
CHECK_BY_ID: Final = {c.id: c for c in CHECKS}

UNKNOWN_ID: Final = "oarbank-conformance-no-such-object"
UNKNOWN_OP: Final = "oarbank-conformance-no-such-op"

D = TypeVar("D", bound=Document)


@dataclass
class CheckResult:
    check: Check
    outcome: Outcome
    message: str = ""
    duration_s: float = 0.0


class _CheckFailed(Exception):
    pass


class _Skip(Exception):
    pass


@dataclass
class RunnerOptions:
    bundle_root: Path = field(default_factory=Path.cwd)
    data_dir: Path | None = None
    service: str = "conformance"
    module: str = "conformance"
    node_id: str = "conformance-node"
    settings: dict[str, Any] = field(default_factory=dict)
    timeouts: dict[str, float] = field(default_factory=dict)
    ready_timeout_s: float = 60.0
    ready_poll_s: float = 0.2
    repeat: int = 3
    probe: bool = False


class ConformanceRunner:
    """Runs the checks in spec order; later checks skip when a prerequisite failed."""

    def __init__(self, exec_argv: Sequence[str], options: RunnerOptions | None = None) -> None:
        self.exec_argv = list(exec_argv)
        self.options = options or RunnerOptions()
        self.results: list[CheckResult] = []
        self._all_runs: list[ExecResult] = []
        self._created: list[str] = []
        self._started = False
        self.executor: Executor | None = None

    # ------------------------------------------------------------------ plumbing

    def _run(self, op: str, *args: str) -> ExecResult:
        assert self.executor is not None
        result = self.executor.run_raw_sync(op, *args)
        self._all_runs.append(result)
        return result

    def _doc(self, result: ExecResult, model: type[D]) -> D:
        """The document of a successful run, or a failure message naming what is wrong."""
        if result.timed_out:
            raise _CheckFailed(f"`{result.op}` timed out after {result.timeout_s:g} s")
        if result.output_too_large:
            raise _CheckFailed(f"`{result.op}` printed more than the output cap")
        if result.exit_code != 0:
            tail = f"; stderr: {result.stderr_tail[-300:]!r}" if result.stderr_tail else ""
            raise _CheckFailed(
                f"`{result.op}` exited {result.exit_code}; stdout {result.stdout[:200]!r}{tail}"
            )
        try:
            return validate_document(model, parse_json_object(result.stdout)).document
        except DocumentError as exc:
            raise _CheckFailed(f"`{result.op}`: {exc}") from None

    def _check(self, check_id: str, body: Callable[[], str | None], *needs: str) -> bool:
        check = CHECK_BY_ID[check_id]
        began = time.monotonic()
        failed_needs = [n for n in needs if self._outcome(n) != "pass"]
        if failed_needs:
            self.results.append(
                CheckResult(check, "skip", f"prerequisite {', '.join(failed_needs)} did not pass")
            )
            return False
        try:
            note = body()
        except _Skip as exc:
            self.results.append(CheckResult(check, "skip", str(exc), time.monotonic() - began))
            return False
        except _CheckFailed as exc:
            self.results.append(CheckResult(check, "fail", str(exc), time.monotonic() - began))
            return False
        except ExecError as exc:
            self.results.append(CheckResult(check, "fail", str(exc), time.monotonic() - began))
            return False
        self.results.append(CheckResult(check, "pass", note or "", time.monotonic() - began))
        return True

    def _outcome(self, check_id: str) -> Outcome | None:
        for result in self.results:
            if result.check.id == check_id:
                return result.outcome
        return None

    def _tree(self) -> dict[str, tuple[int, int]]:
        """Files under the data directory (except tmp/) with size and mtime."""
        assert self.executor is not None
        root = self.executor.context.data_dir
        snapshot: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = os.path.relpath(dirpath, root)
            if rel_dir == "tmp" or rel_dir.startswith("tmp" + os.sep):
                dirnames[:] = []
                continue
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                snapshot[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
        return snapshot

    # ------------------------------------------------------------------ the run

    def run(self) -> list[CheckResult]:
        opts = self.options
        temp: str | None = None
        data_dir = opts.data_dir
        if data_dir is None:
            temp = tempfile.mkdtemp(prefix="oarbank-conformance-")
            data_dir = Path(temp)
        context = ExecContext(
            bundle_root=opts.bundle_root.resolve(),
            module=opts.module,
            node_id=opts.node_id,
            data_dir=data_dir.resolve(),
            settings=opts.settings,
        )
        try:
            self.executor = Executor(
                self.exec_argv, context, service=opts.service, timeouts=opts.timeouts
            )
            self._run_checks()
        finally:
            self._cleanup()
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        return self.results

    def _run_checks(self) -> None:
        fingerprint_result: list[ExecResult] = []

        def sp001() -> str:
            result = self._run("fingerprint")
            fingerprint_result.append(result)
            if result.exit_code != 0 or result.timed_out:
                raise _CheckFailed(
                    f"fingerprint exited {result.exit_code}"
                    + (" (timed out)" if result.timed_out else "")
                )
            try:
                parse_json_object(result.stdout)
            except DocumentError as exc:
                raise _CheckFailed(str(exc)) from None
            return ""

        self._check("SP-001", sp001)

        def sp002() -> str:
            raw = parse_json_object(fingerprint_result[0].stdout)
            parsed = validate_document(Fingerprint, raw)
            if not self.options.probe and "running" not in raw:
                raise _CheckFailed("a service's fingerprint must say whether it is running")
            if parsed.unknown_fields:
                return f"unknown fields (allowed): {', '.join(parsed.unknown_fields)}"
            return ""

        def sp002_guarded() -> str:
            try:
                return sp002()
            except DocumentError as exc:
                raise _CheckFailed(str(exc)) from None

        self._check("SP-002", sp002_guarded, "SP-001")

        def sp003() -> str:
            if not fingerprint_result:
                raise _CheckFailed("fingerprint could not be run")
            result = fingerprint_result[0]
            if result.timed_out:
                raise _CheckFailed(f"timed out after {result.timeout_s:g} s")
            return f"{result.duration_s:.3f} s"

        self._check("SP-003", sp003)

        def sp004() -> str:
            probe = self.options.probe
            before_tree = self._tree()
            before = None if probe else self._visible_state()
            for _ in range(3):
                self._doc(self._run("fingerprint"), Fingerprint)
            after_tree = self._tree()
            changed = sorted(
                set(before_tree.items()).symmetric_difference(after_tree.items()), key=str
            )
            if changed:
                names = sorted({name for name, _ in changed})
                raise _CheckFailed(f"fingerprint changed files in the data dir: {names[:5]}")
            if not probe and self._visible_state() != before:
                raise _CheckFailed("fingerprint changed what status or list_owned report")
            return ""

        self._check("SP-004", sp004, "SP-001")
        if self.options.probe:
            self._check("SP-025", self._sp025)
            return
        self._service_checks()

    def _visible_state(self) -> tuple[Any, ...]:
        status = self._doc(self._run("status"), Status)
        owned = self._doc(self._run("list_owned"), OwnedList)
        ids = sorted(o.id for o in owned.objects)
        return (status.running, status.ready, tuple(ids))

    def _service_checks(self) -> None:
        def sp005() -> str:
            status = self._doc(self._run("status"), Status)
            if status.running:
                raise _Skip("the service was already running before the run; cannot test")
            return ""

        self._check("SP-005", sp005)

        def sp006() -> str:
            status = self._doc(self._run("ready"), Status)
            if status.ready:
                raise _CheckFailed("ready=true for a service that is not running")
            return ""

        self._check("SP-006", sp006)

        def sp007() -> str:
            for _ in range(self.options.repeat):
                self._doc(self._run("stop"), OpResult)
            return ""

        self._check("SP-007", sp007)

        start_results: list[OpResult] = []

        def sp008() -> str:
            self._started = True
            result = self._doc(self._run("start"), OpResult)
            start_results.append(result)
            self._created = list(result.created)
            return f"created {len(result.created)} object(s)"

        self._check("SP-008", sp008)

        def sp009() -> str:
            before = self._doc(self._run("fingerprint"), Fingerprint).pid
            for _ in range(self.options.repeat - 1):
                self._doc(self._run("start"), OpResult)
            after = self._doc(self._run("fingerprint"), Fingerprint).pid
            if before is not None and after is not None and before != after:
                raise _CheckFailed(f"a second start replaced the service (pid {before} → {after})")
            return ""

        self._check("SP-009", sp009, "SP-008")

        def sp010() -> str:
            deadline = time.monotonic() + self.options.ready_timeout_s
            polls = 0
            while True:
                status = self._doc(self._run("ready"), Status)
                polls += 1
                if status.ready and not status.running:
                    raise _CheckFailed("ready=true while running=false")
                if status.ready:
                    return f"ready after {polls} poll(s)"
                if time.monotonic() >= deadline:
                    raise _CheckFailed(
                        f"not ready within {self.options.ready_timeout_s:g} s ({polls} polls)"
                    )
                time.sleep(self.options.ready_poll_s)

        self._check("SP-010", sp010, "SP-008")

        def sp011() -> str:
            status = self._doc(self._run("status"), Status)
            if not status.running:
                raise _CheckFailed("status says running=false after a successful start")
            if status.ready and not status.running:
                raise _CheckFailed("ready=true while running=false")
            return ""

        self._check("SP-011", sp011, "SP-008")

        def sp012() -> str:
            if not self._doc(self._run("fingerprint"), Fingerprint).running:
                raise _CheckFailed("fingerprint.running is false while the service runs")
            return ""

        self._check("SP-012", sp012, "SP-008")

        owned: list[OwnedList] = []

        def sp013() -> str:
            owned.append(self._doc(self._run("list_owned"), OwnedList))
            return f"{len(owned[0].objects)} object(s)"

        self._check("SP-013", sp013)

        def sp014() -> str:
            bad = [o.id for o in owned[0].objects if o.missing_labels()]
            if bad:
                raise _CheckFailed(f"objects without the three labels: {bad[:5]}")
            if not owned[0].objects:
                raise _Skip("list_owned returned no objects")
            return ""

        self._check("SP-014", sp014, "SP-013")

        def sp015() -> str:
            if not self._created:
                raise _Skip("start reported no created objects")
            listed = {o.id for o in owned[0].objects}
            missing = [i for i in self._created if i not in listed]
            if missing:
                raise _CheckFailed(f"created but not listed: {missing}")
            return ""

        self._check("SP-015", sp015, "SP-013", "SP-008")

        def sp016() -> str:
            for _ in range(self.options.repeat):
                self._doc(self._run("destroy", UNKNOWN_ID), OpResult)
            return ""

        self._check("SP-016", sp016)

        by_id: dict[str, OwnedObject] = {o.id: o for o in owned[0].objects} if owned else {}
        busy = [i for i in self._created if by_id.get(i) and by_id[i].busy]

        def sp017() -> str:
            if not busy:
                raise _Skip("start created no object marked busy")
            result = self._run("destroy", busy[0])
            if result.exit_code == 0:
                raise _CheckFailed(f"destroy without --force of busy {busy[0]!r} succeeded")
            try:
                validate_document(ErrorDocument, parse_json_object(result.stdout))
            except DocumentError as exc:
                raise _CheckFailed(f"no error document on stdout: {exc}") from None
            listed = {o.id for o in self._doc(self._run("list_owned"), OwnedList).objects}
            if busy[0] not in listed:
                raise _CheckFailed("the refused destroy removed the object anyway")
            return ""

        self._check("SP-017", sp017, "SP-013")

        destroyed: list[str] = []

        def sp018() -> str:
            if not busy:
                raise _Skip("start created no object marked busy")
            self._doc(self._run("destroy", busy[0], "--force"), OpResult)
            destroyed.append(busy[0])
            listed = {o.id for o in self._doc(self._run("list_owned"), OwnedList).objects}
            if busy[0] in listed:
                raise _CheckFailed(f"{busy[0]!r} still listed after destroy --force")
            return ""

        self._check("SP-018", sp018, "SP-013")

        def sp019() -> str:
            if not destroyed:
                idle = [i for i in self._created if by_id.get(i) and not by_id[i].busy]
                if not idle:
                    raise _Skip("no created object to destroy")
                self._doc(self._run("destroy", idle[0]), OpResult)
                destroyed.append(idle[0])
            for _ in range(self.options.repeat):
                self._doc(self._run("destroy", destroyed[0]), OpResult)
            return ""

        self._check("SP-019", sp019, "SP-013")

        def sp020() -> str:
            result = self._doc(self._run("stop"), OpResult)
            self._started = False
            return "escalated" if result.escalated else ""

        self._check("SP-020", sp020)

        def sp021() -> str:
            status = self._doc(self._run("status"), Status)
            ready = self._doc(self._run("ready"), Status)
            fingerprint = self._doc(self._run("fingerprint"), Fingerprint)
            problems = []
            if status.running:
                problems.append("status.running")
            if ready.ready:
                problems.append("ready.ready")
            if fingerprint.running:
                problems.append("fingerprint.running")
            if problems:
                raise _CheckFailed(f"still true after stop: {', '.join(problems)}")
            return ""

        self._check("SP-021", sp021, "SP-020")

        def sp022() -> str:
            for _ in range(self.options.repeat):
                self._doc(self._run("stop"), OpResult)
            return ""

        self._check("SP-022", sp022, "SP-020")

        def sp023() -> str:
            result = self._run(UNKNOWN_OP)
            if result.exit_code == 0:
                raise _CheckFailed("an unknown operation exited 0")
            return ""

        self._check("SP-023", sp023)

        def sp024() -> str:
            offenders = []
            for result in self._all_runs:
                if result.exit_code in (0, None) or result.timed_out or not result.stdout.strip():
                    continue
                try:
                    validate_document(ErrorDocument, parse_json_object(result.stdout))
                except DocumentError as exc:
                    offenders.append(f"{' '.join(result.argv[-2:])}: {exc}")
            if offenders:
                raise _CheckFailed("; ".join(offenders[:3]))
            return f"{sum(1 for r in self._all_runs if r.exit_code)} non-zero exit(s) checked"

        self._check("SP-024", sp024)
        self._check("SP-025", self._sp025)

    def _sp025(self) -> str:
        held = [r.op for r in self._all_runs if r.pipe_held and not r.timed_out]
        if held:
            raise _CheckFailed(
                f"stdout/stderr still open after exit for: {sorted(set(held))} "
                "(daemons must detach their stdio)"
            )
        return f"{len(self._all_runs)} run(s)"

    def _cleanup(self) -> None:
        """Leave nothing behind: stop the service and force-destroy what start created."""
        if self.executor is None or self.options.probe:
            return
        for object_id in self._created:
            try:
                self.executor.run_raw_sync("destroy", object_id, "--force")
            except ExecError:
                pass
        if self._started:
            try:
                self.executor.run_raw_sync("stop")
            except ExecError:
                pass


# --------------------------------------------------------------------------- reporting


def passed(results: Sequence[CheckResult]) -> bool:
    return all(r.outcome != "fail" for r in results)


def format_text(results: Sequence[CheckResult]) -> str:
    lines = []
    for r in results:
        note = f" — {r.message}" if r.message else ""
        lines.append(f"{r.outcome.upper():4} {r.check.id} {r.check.title}{note}")
    failed = sum(1 for r in results if r.outcome == "fail")
    skipped = sum(1 for r in results if r.outcome == "skip")
    lines.append(
        f"{len(results)} checks: {len(results) - failed - skipped} passed, "
        f"{failed} failed, {skipped} skipped"
    )
    return "\n".join(lines) + "\n"


def format_tap(results: Sequence[CheckResult]) -> str:
    lines = ["TAP version 13", f"1..{len(results)}"]
    for number, r in enumerate(results, start=1):
        desc = f"{r.check.id} {r.check.title}"
        if r.outcome == "pass":
            lines.append(f"ok {number} - {desc}")
        elif r.outcome == "skip":
            lines.append(f"ok {number} - {desc} # SKIP {r.message}")
        else:
            lines.append(f"not ok {number} - {desc}")
            lines.append("  ---")
            message = r.message.replace("\n", " ")
            lines.append(f"  message: {message!r}")
            lines.append("  ...")
    return "\n".join(lines) + "\n"


def format_junit(results: Sequence[CheckResult]) -> str:
    suite = ET.Element(
        "testsuite",
        name="service-protocol-1 conformance",
        tests=str(len(results)),
        failures=str(sum(1 for r in results if r.outcome == "fail")),
        skipped=str(sum(1 for r in results if r.outcome == "skip")),
        errors="0",
        time=f"{sum(r.duration_s for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname="service-protocol-1",
            name=f"{r.check.id} {r.check.title}",
            time=f"{r.duration_s:.3f}",
        )
        if r.outcome == "fail":
            ET.SubElement(case, "failure", message=r.message[:1000]).text = r.message
        elif r.outcome == "skip":
            ET.SubElement(case, "skipped", message=r.message)
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# --------------------------------------------------------------------------- CLI


def _timeout(value: str) -> tuple[str, float]:
    op, sep, seconds = value.partition("=")
    if not sep or op not in OPS:
        raise argparse.ArgumentTypeError(f"expected OP=SECONDS with OP one of {', '.join(OPS)}")
    return op, float(seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m srt_oarbank.conformance",
        description="Check an executable against service protocol 1 (destructive: it starts, "
        "stops and destroys).",
    )
    parser.add_argument("exec", nargs="+", metavar="EXEC", help="executable and its arguments")
    parser.add_argument("--bundle", type=Path, default=Path.cwd(), help="cwd for the executable")
    parser.add_argument("--data", type=Path, help="module data dir (default: a temporary one)")
    parser.add_argument("--service", default="conformance", help="OARBANK_SERVICE")
    parser.add_argument("--module", default="conformance", help="OARBANK_MODULE")
    parser.add_argument("--node-id", default="conformance-node", help="OARBANK_NODE_ID")
    parser.add_argument("--settings", type=Path, help="settings file (JSON object)")
    parser.add_argument("--probe", action="store_true", help="a probe: check fingerprint only")
    parser.add_argument("--ready-timeout-s", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions for idempotency")
    parser.add_argument("--timeout", type=_timeout, action="append", default=[], metavar="OP=S")
    output = parser.add_argument_group("output")
    output.add_argument("--tap", action="store_true", help="TAP on stdout")
    output.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_json_file(args.settings, "settings") if args.settings else {}
    except ValueError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    options = RunnerOptions(
        bundle_root=args.bundle,
        data_dir=args.data,
        service=args.service,
        module=args.module,
        node_id=args.node_id,
        settings=settings,
        timeouts={**DEFAULT_TIMEOUTS, **dict(args.timeout)},
        ready_timeout_s=args.ready_timeout_s,
        repeat=max(args.repeat, 1),
        probe=args.probe,
    )
    try:
        results = ConformanceRunner(args.exec, options).run()
    except (ValueError, ExecError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(format_tap(results) if args.tap else format_text(results))
    if args.junit:
        args.junit.write_text(format_junit(results), encoding="utf-8")
    return 0 if passed(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
