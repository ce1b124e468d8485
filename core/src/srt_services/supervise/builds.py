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
from typing import TYPE_CHECKING

from srt_services.launch import process
from srt_services.launch.children import CommandResult, run_command
from srt_services.plan.model import PlannedBuild
from srt_services.supervise.orchestrator import PhaseFailed

if TYPE_CHECKING:
    from srt_services.supervise.orchestrator import Orchestrator, UnitRun

GIT_TIMEOUT = 600.0


def git_env() -> dict[str, str]:
    env = process.service_env({}, {})
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("HOME", "/tmp")
    return env


async def _git(
    orch: Orchestrator, node: str, log: str, *args: str, cwd: str | None = None
) -> CommandResult:
    assert orch.launcher is not None
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ git {' '.join(args)}\n")
    return await orch.launcher.run_oneshot(
        ["git", "-c", "advice.detachedHead=false", *args],
        node,
        log,
        git_env(),
        GIT_TIMEOUT,
        cwd=cwd,
    )


def _fail(unit: str, what: str, result: CommandResult, log: str, timeout: float) -> PhaseFailed:
    if result.timed_out:
        message = f"services[{unit}] {what} timed out after {timeout:g}s and was killed; see {log}"
    else:
        message = f"services[{unit}] {what} failed (exit {result.code}); see {log}"
    tail = process.tail(log, 20)
    if tail:
        message += "\n" + "\n".join(f"    {line}" for line in tail)
    return PhaseFailed(
        message, {"kind": "build_failed", "unit": unit, "step": what, "code": result.code}
    )


async def _quiet_git(orch: Orchestrator, *args: str) -> CommandResult:
    """A read-only git query on the shared checkout, answered here (not on the node)."""
    assert orch.watcher is not None
    return await run_command(orch.watcher, ["git", *args], 60.0, env=git_env())


async def _head(orch: Orchestrator, src: str) -> str | None:
    result = await _quiet_git(orch, "-C", src, "rev-parse", "HEAD")
    return result.stdout.strip() if result.ok else None


async def checkout(orch: Orchestrator, unit: str, build: PlannedBuild, node: str) -> None:
    clone_log = orch.job.inside(f"logs/service_{unit}.clone.out")
    src = build.src_dir
    want = build.checkout
    if os.path.isdir(os.path.join(src, ".git")):
        head = await _head(orch, src)
        if head is not None and head.startswith(want) and (want != build.rev or _is_sha(want)):
            orch._emit("checkout_reused", unit=unit, commit=head)
            return
        shutil.rmtree(src)
    os.makedirs(os.path.dirname(src), exist_ok=True)
    result = await _git(orch, node, clone_log, "clone", "--quiet", "--no-checkout", build.git, src)
    if not result.ok:
        raise _fail(unit, "source clone", result, clone_log, GIT_TIMEOUT)
    target = want
    known = await _quiet_git(orch, "-C", src, "cat-file", "-e", f"{want}^{{commit}}")
    if not known.ok:
        result = await _git(
            orch, node, clone_log, "-C", src, "fetch", "--quiet", "origin", build.rev
        )
        if not result.ok:
            raise _fail(unit, "source fetch", result, clone_log, GIT_TIMEOUT)
        target = want if want != build.rev and _is_sha(want) else "FETCH_HEAD"
    result = await _git(orch, node, clone_log, "-C", src, "checkout", "--quiet", "--detach", target)
    if not result.ok:
        raise _fail(unit, "source checkout", result, clone_log, GIT_TIMEOUT)
    head = await _head(orch, src)
    if head is None or (_is_sha(want) and not head.startswith(want)):
        raise PhaseFailed(
            f"services[{unit}] checkout is at {head}, not {want}; see {clone_log}",
            {"kind": "build_failed", "unit": unit, "step": "checkout"},
        )
    orch._emit("checkout_done", unit=unit, commit=head)


def _is_sha(value: str) -> bool:
    return 4 <= len(value) <= 40 and all(c in "0123456789abcdef" for c in value)


async def build_source(orch: Orchestrator, unit_run: UnitRun) -> None:
    unit = unit_run.planned
    build = unit.build
    assert build is not None
    assert orch.launcher is not None
    # Nodes that see the job directory (all of them, locally) share one checkout and one
    # build; a node with its own filesystem gets its own.
    shared = [n for n in build.nodes if await orch.launcher.sees_job_dir(n)]
    nodes = shared[:1] + [n for n in build.nodes if n not in shared]
    for node in nodes:
        started = time.monotonic()
        await checkout(orch, unit.name, build, node)
        if build.build_command:
            log = orch.job.inside(f"logs/service_{unit.name}.build.out")
            cwd = os.path.join(build.src_dir, build.path) if build.path else build.src_dir
            orch._emit("build_started", unit=unit.name, node=node, argv=build.build_command)
            env = process.service_env(
                build.env,
                {
                    process.COOKIE_VAR: orch.options.cookie,
                    process.INSTANCE_VAR: f"service_{unit.name}.build",
                },
            )
            result = await orch.launcher.run_oneshot(
                build.build_command,
                node,
                log,
                env,
                build.timeout,
                cwd=cwd,
                container=unit.container,
            )
            if not result.ok:
                raise _fail(unit.name, "build_command", result, log, build.timeout)
            orch._emit(
                "build_done",
                unit=unit.name,
                node=node,
                seconds=round(time.monotonic() - started, 3),
            )
