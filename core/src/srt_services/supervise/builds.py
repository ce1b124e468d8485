"""Source checkouts and builds, before a service's first launch.

First the rev becomes a commit: a full SHA (written, or pinned by ``srt apply``) is used as
is; a tag or a PR head is resolved with ``git ls-remote`` exactly as ``srt apply`` does,
and a rev that turns out to be a branch fails the job before anything is cloned. Every git
command and the build are bounded by timeouts and run as tracked children of the
orchestrator, so a hung clone never holds the job and teardown kills it like any other
process.

Where the checkout lives follows the unit's ``build_scope``:

* ``node`` (the default): every node of the placement clones into its own node-local
  directory (under the job's ``{local_dir}`` root, removed when the job ends) and builds
  there, in the service's container, all nodes at once. Whatever the build installs into
  the node's environment is then on every node that runs an instance.
* ``shared``: one checkout in ``<job_dir>/src/<name>``, built once by the first node that
  sees the job directory (a node that does not gets its own), reused by a later run in the
  same job directory when ``HEAD`` is that commit. Right for builds whose only output is
  files in the checkout.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.contracts.handle import CommandResult
from srt_services.contracts.plan import PlannedBuild, PlannedUnit
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.jobdir.layout import JobDir
from srt_services.launch import process
from srt_services.launch.children import ChildWatcher, run_command
from srt_services.recipe import pinning
from srt_services.recipe.revs import is_full_sha
from srt_services.supervise.runs import Emit, PhaseFailed

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher

GIT_TIMEOUT = 600.0
#: Log lines quoted in a failure.
TAIL_LINES = 20


def git_env() -> dict[str, str]:
    env = process.service_env({}, {})
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("HOME", "/tmp")
    return env


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


def _failed(unit: str, step: str, message: str) -> PhaseFailed:
    return PhaseFailed(StopCause(StopKind.BUILD_FAILED, message, unit=unit, step=step))


async def all_or_nothing(jobs: list[Awaitable[None]]) -> None:
    """Run ``jobs`` at once; the first failure cancels the others (their commands are
    killed by :func:`run_command`) and is raised as it is."""
    tasks = [asyncio.ensure_future(j) for j in jobs]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@dataclass(slots=True)
class _Target:
    """One checkout to make: on which node, where, and which logs it writes."""

    node: str
    src: str
    #: the stem of its logs and its build's step (``service_<name>[_<node>]``)
    stem: str
    #: the checkout is on the node's own disk: every query runs there, nothing is reused
    on_node: bool


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
        commit = await self.commit_of(unit.name, build)
        if build.scope == "node":
            several = len(build.nodes) > 1
            targets = [
                _Target(
                    node,
                    build.checkout_dir(node),
                    f"service_{unit.name}_{node}" if several else f"service_{unit.name}",
                    True,
                )
                for node in build.nodes
            ]
            await all_or_nothing([self._one(unit, build, commit, t) for t in targets])
            return
        # Nodes that see the job directory (all of them, locally) share one checkout and one
        # build; a node with its own filesystem gets its own.
        shared = [n for n in build.nodes if await self.launcher.sees_job_dir(n)]
        for node in shared[:1] + [n for n in build.nodes if n not in shared]:
            target = _Target(node, build.src_dir, f"service_{unit.name}", node not in shared)
            await self._one(unit, build, commit, target)

    async def commit_of(self, unit: str, build: PlannedBuild) -> str:
        """The full commit the rev names: as written or pinned, else asked of the remote
        (the same ``git ls-remote`` and the same refusal of branches as ``srt apply``)."""
        if is_full_sha(build.checkout):
            return build.checkout
        result = await run_command(
            self.watcher,
            pinning.ls_remote_argv(build.git, build.checkout),
            pinning.LS_REMOTE_TIMEOUT,
            env=pinning.git_env(),
        )
        where = f"services[{unit}].source.rev {build.checkout!r}"
        if result.timed_out:
            raise _failed(
                unit,
                "resolve",
                f"{where}: git ls-remote {build.git} did not answer within"
                f" {pinning.LS_REMOTE_TIMEOUT:g}s",
            )
        if not result.ok:
            detail = result.stderr.strip()[-500:] or f"exit {result.code}"
            raise _failed(unit, "resolve", f"{where}: git ls-remote {build.git} failed: {detail}")
        try:
            commit = pinning.pick(build.git, build.checkout, pinning.parse_refs(result.stdout))
        except pinning.PinError as exc:
            raise _failed(unit, "resolve", f"{where}: {exc}") from None
        self.emit("rev_resolved", unit=unit, rev=build.checkout, commit=commit)
        return commit

    async def _one(self, unit: PlannedUnit, build: PlannedBuild, commit: str, t: _Target) -> None:
        started = time.monotonic()
        await self.checkout(unit.name, build, commit, t)
        if build.build_command:
            await self._build(unit, build, build.build_command, t, started)

    async def _build(
        self, unit: PlannedUnit, build: PlannedBuild, argv: list[str], t: _Target, started: float
    ) -> None:
        step = f"{t.stem}.build"
        log = self.job.inside(f"logs/{step}.out")
        cwd = os.path.join(t.src, build.path) if build.path else t.src
        self.emit("build_started", unit=unit.name, node=t.node, argv=argv, step=step)
        env = process.service_env(build.env, {COOKIE_VAR: self.cookie, INSTANCE_VAR: step})
        result = await self.launcher.run_oneshot(
            argv, t.node, log, env, build.timeout, cwd=cwd, container=unit.container
        )
        if not result.ok:
            raise _fail(unit.name, "build_command", result, log, build.timeout)
        self.emit(
            "build_done",
            unit=unit.name,
            node=t.node,
            seconds=round(time.monotonic() - started, 3),
            step=step,
        )

    async def checkout(self, unit: str, build: PlannedBuild, commit: str, t: _Target) -> None:
        clone_log = self.job.inside(f"logs/{t.stem}.clone.out")
        src = t.src
        if t.on_node:
            # the node's own disk: cleared first (an earlier attempt of this job id)
            await self._on_node(unit, t.node, clone_log, ["rm", "-rf", "--", src], "clear")
        elif os.path.isdir(os.path.join(src, ".git")):
            if await self._head(src) == commit:
                self.emit("checkout_reused", unit=unit, commit=commit, node=t.node)
                return
            shutil.rmtree(src)
        if not t.on_node:
            os.makedirs(os.path.dirname(src), exist_ok=True)
        result = await self._git(
            t.node, clone_log, "clone", "--quiet", "--no-checkout", build.git, src
        )
        if not result.ok:
            raise _fail(unit, "source clone", result, clone_log, GIT_TIMEOUT)
        if not await self._has_commit(t, clone_log, commit):
            # a PR head, or a commit no branch or tag reaches: fetch what the rev names
            result = await self._git(
                t.node, clone_log, "-C", src, "fetch", "--quiet", "origin", build.rev
            )
            if not result.ok:
                raise _fail(unit, "source fetch", result, clone_log, GIT_TIMEOUT)
        result = await self._git(
            t.node, clone_log, "-C", src, "checkout", "--quiet", "--detach", commit
        )
        if not result.ok:
            raise _fail(unit, "source checkout", result, clone_log, GIT_TIMEOUT)
        if not await self._head_is(t, clone_log, commit):
            raise _failed(
                unit,
                "checkout",
                f"services[{unit}] checkout on {t.node} is not at {commit}; see {clone_log}",
            )
        self.emit("checkout_done", unit=unit, commit=commit, node=t.node)

    async def _has_commit(self, t: _Target, log: str, commit: str) -> bool:
        argv = ["git", "-C", t.src, "cat-file", "-e", f"{commit}^{{commit}}"]
        if t.on_node:
            result = await self.launcher.run_oneshot(argv, t.node, log, git_env(), 60.0)
        else:
            result = await run_command(self.watcher, argv, 60.0, env=git_env())
        return result.ok

    async def _head_is(self, t: _Target, log: str, commit: str) -> bool:
        if not t.on_node:
            return await self._head(t.src) == commit
        test = 'test "$(git -C "$1" rev-parse HEAD)" = "$2"'
        argv = ["sh", "-c", test, "srt-verify", t.src, commit]
        result = await self.launcher.run_oneshot(argv, t.node, log, git_env(), 60.0)
        return result.ok

    async def _on_node(self, unit: str, node: str, log: str, argv: list[str], what: str) -> None:
        result = await self.launcher.run_oneshot(argv, node, log, git_env(), 60.0)
        if not result.ok:
            raise _fail(unit, f"source {what}", result, log, 60.0)

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

    async def _head(self, src: str) -> str | None:
        """``HEAD`` of a checkout this process sees (a shared one), asked here."""
        result = await run_command(
            self.watcher, ["git", "-C", src, "rev-parse", "HEAD"], 60.0, env=git_env()
        )
        return result.stdout.strip() if result.ok else None
