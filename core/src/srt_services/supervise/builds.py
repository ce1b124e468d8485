"""Source checkouts and builds, before a service's first launch.

The checkout lands in ``<job_dir>/src/<name>`` at exactly the commit the recipe pins (or the
commit its tag or PR ref resolves to); a checkout that already exists is reused only when
``HEAD`` is that commit. Every git command and the build are bounded by timeouts and run as
tracked children of the orchestrator, so a hung clone never holds the job and teardown
kills it like any other process.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.jobdir.layout import JobDir
from srt_services.launch import process
from srt_services.launch.children import ChildWatcher, CommandResult, run_command
from srt_services.plan.model import PlannedBuild, PlannedUnit
from srt_services.supervise.runs import Emit, PhaseFailed

if TYPE_CHECKING:
    from srt_services.extend.launcher import Launcher

GIT_TIMEOUT = 600.0
#: Log lines quoted in a failure.
TAIL_LINES = 20


def git_env() -> dict[str, str]:
    env = process.service_env({}, {})
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("HOME", "/tmp")
    return env


def _is_sha(value: str) -> bool:
    return 4 <= len(value) <= 40 and all(c in "0123456789abcdef" for c in value)


def _fail(unit: str, what: str, result: CommandResult, log: str, timeout: float) -> PhaseFailed:
    if result.timed_out:
        message = f"services[{unit}] {what} timed out after {timeout:g}s and was killed; see {log}"
    else:
        message = f"services[{unit}] {what} failed (exit {result.code}); see {log}"
    tail = process.tail(log, TAIL_LINES)
    if tail:
        message += "\n" + "\n".join(f"    {line}" for line in tail)
    return PhaseFailed(
        StopCause(StopKind.BUILD_FAILED, message, unit=unit, step=what, code=result.code)
    )


@dataclass(slots=True)
class Builder:
    """Checks out and builds a unit's source; handed what it needs by the orchestrator."""

    launcher: Launcher
    watcher: ChildWatcher
    job: JobDir
    cookie: str
    emit: Emit

    async def build_source(self, unit: PlannedUnit) -> None:
        build = unit.build
        assert build is not None
        # Nodes that see the job directory (all of them, locally) share one checkout and one
        # build; a node with its own filesystem gets its own.
        shared = [n for n in build.nodes if await self.launcher.sees_job_dir(n)]
        nodes = shared[:1] + [n for n in build.nodes if n not in shared]
        for node in nodes:
            started = time.monotonic()
            await self.checkout(unit.name, build, node)
            if build.build_command:
                await self._build(unit, build, build.build_command, node, started)

    async def _build(
        self, unit: PlannedUnit, build: PlannedBuild, argv: list[str], node: str, started: float
    ) -> None:
        log = self.job.inside(f"logs/service_{unit.name}.build.out")
        cwd = os.path.join(build.src_dir, build.path) if build.path else build.src_dir
        self.emit("build_started", unit=unit.name, node=node, argv=argv)
        env = process.service_env(
            build.env, {COOKIE_VAR: self.cookie, INSTANCE_VAR: f"service_{unit.name}.build"}
        )
        result = await self.launcher.run_oneshot(
            argv, node, log, env, build.timeout, cwd=cwd, container=unit.container
        )
        if not result.ok:
            raise _fail(unit.name, "build_command", result, log, build.timeout)
        self.emit(
            "build_done", unit=unit.name, node=node, seconds=round(time.monotonic() - started, 3)
        )

    async def checkout(self, unit: str, build: PlannedBuild, node: str) -> None:
        clone_log = self.job.inside(f"logs/service_{unit}.clone.out")
        src = build.src_dir
        want = build.checkout
        if os.path.isdir(os.path.join(src, ".git")):
            head = await self._head(src)
            if head is not None and head.startswith(want) and (want != build.rev or _is_sha(want)):
                self.emit("checkout_reused", unit=unit, commit=head)
                return
            shutil.rmtree(src)
        os.makedirs(os.path.dirname(src), exist_ok=True)
        result = await self._git(
            node, clone_log, "clone", "--quiet", "--no-checkout", build.git, src
        )
        if not result.ok:
            raise _fail(unit, "source clone", result, clone_log, GIT_TIMEOUT)
        target = await self._fetch_if_unknown(unit, build, node, clone_log)
        result = await self._git(
            node, clone_log, "-C", src, "checkout", "--quiet", "--detach", target
        )
        if not result.ok:
            raise _fail(unit, "source checkout", result, clone_log, GIT_TIMEOUT)
        head = await self._head(src)
        if head is None or (_is_sha(want) and not head.startswith(want)):
            raise PhaseFailed(
                StopCause(
                    StopKind.BUILD_FAILED,
                    f"services[{unit}] checkout is at {head}, not {want}; see {clone_log}",
                    unit=unit,
                    step="checkout",
                )
            )
        self.emit("checkout_done", unit=unit, commit=head)

    async def _fetch_if_unknown(
        self, unit: str, build: PlannedBuild, node: str, clone_log: str
    ) -> str:
        """What to check out: the wanted commit if the clone has it, else what the rev
        fetches (a PR ref, or a commit no branch reaches)."""
        want = build.checkout
        known = await self._quiet_git("-C", build.src_dir, "cat-file", "-e", f"{want}^{{commit}}")
        if known.ok:
            return want
        result = await self._git(
            node, clone_log, "-C", build.src_dir, "fetch", "--quiet", "origin", build.rev
        )
        if not result.ok:
            raise _fail(unit, "source fetch", result, clone_log, GIT_TIMEOUT)
        return want if want != build.rev and _is_sha(want) else "FETCH_HEAD"

    async def _git(self, node: str, log: str, *args: str) -> CommandResult:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"$ git {' '.join(args)}\n")
        return await self.launcher.run_oneshot(
            ["git", "-c", "advice.detachedHead=false", *args],
            node,
            log,
            git_env(),
            GIT_TIMEOUT,
        )

    async def _quiet_git(self, *args: str) -> CommandResult:
        """A read-only git query on the shared checkout, answered here (not on the node)."""
        return await run_command(self.watcher, ["git", *args], 60.0, env=git_env())

    async def _head(self, src: str) -> str | None:
        result = await self._quiet_git("-C", src, "rev-parse", "HEAD")
        return result.stdout.strip() if result.ok else None
