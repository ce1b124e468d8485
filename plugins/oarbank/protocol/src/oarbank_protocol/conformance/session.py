"""The executable under test, as the conformance checks talk to it.

Every op runs through the agent's own executor (the same environment, cwd, timeouts and
output caps an agent would use), is recorded (the whole-run checks look back at every
run), and its answer is held to what the spec needs before a check reads it: exit 0,
exactly one JSON object, ``running``/``ready`` as booleans, owned objects with string ids.
What the answers cannot be trusted for (did stop really stop? did a second start make a
second instance?) is judged by the processes the module started
(:mod:`~oarbank_protocol.conformance.processes`) and by the data directory's files.
"""

from __future__ import annotations

import os
from typing import Any

from oarbank_protocol.conformance.checks import CheckFailed
from oarbank_protocol.conformance.options import RunnerOptions
from oarbank_protocol.conformance.processes import Found, ModuleProcesses
from oarbank_protocol.documents import LABEL_NODE, LABEL_SERVICE, parse_json_object
from oarbank_protocol.errors import DocumentError, ExecError
from oarbank_protocol.execution.executor import ExecResult, Executor

Processes = dict[tuple[int, int], Found]


def ids(objects: list[dict[str, Any]]) -> list[str]:
    return [o["id"] for o in objects]


class ModuleSession:
    """One run's conversation with the module (see the module docstring)."""

    def __init__(self, executor: Executor, procs: ModuleProcesses, options: RunnerOptions) -> None:
        self.executor = executor
        self.procs = procs
        self.options = options
        #: every op run, in order
        self.runs: list[ExecResult] = []
        #: every ``status``/``ready`` answer, with its op
        self.statuses: list[tuple[str, dict[str, Any]]] = []
        #: ids ``start`` said it created
        self.created: list[str] = []
        #: whether the service may be running (a start ran since the last stop)
        self.started = False

    # ------------------------------------------------------------------ running ops

    def run(self, op: str, *args: str, timeout_s: float | None = None) -> ExecResult:
        result = self.executor.run_raw_sync(op, *args, timeout_s=timeout_s)
        self.runs.append(result)
        self.procs.op_ran(result.pid)
        return result

    def ok(self, result: ExecResult) -> dict[str, Any]:
        """The JSON object a successful run printed, or a failure naming what is wrong."""
        if result.timed_out:
            raise CheckFailed(f"`{result.op}` timed out after {result.timeout_s:g} s")
        if result.output_too_large:
            raise CheckFailed(f"`{result.op}` printed more than the output cap")
        if result.exit_code != 0:
            tail = f"; stderr: {result.stderr_tail[-300:]!r}" if result.stderr_tail else ""
            raise CheckFailed(
                f"`{result.op}` exited {result.exit_code}; stdout {result.stdout[:200]!r}{tail}"
            )
        try:
            return parse_json_object(result.stdout)
        except DocumentError as exc:
            raise CheckFailed(f"`{result.op}`: {exc}") from None

    def call(self, op: str, *args: str) -> dict[str, Any]:
        return self.ok(self.run(op, *args))

    def stop_quietly(self) -> None:
        try:
            self.run("stop")
        except ExecError:
            pass
        self.started = False

    # ------------------------------------------------------------------ reading answers

    def flags(self, op: str) -> tuple[bool, bool]:
        """(running, ready) from ``status`` or ``ready``: the spec's two flags, as booleans."""
        raw = self.call(op)
        self.statuses.append((op, raw))
        running, ready = raw.get("running"), raw.get("ready")
        if not isinstance(running, bool) or not isinstance(ready, bool):
            raise CheckFailed(f"`{op}` must say running and ready as booleans, got {raw!r:.200}")
        return running, ready

    def fingerprint_running(self) -> bool:
        raw = self.call("fingerprint")
        running = raw.get("running")
        if not isinstance(running, bool):
            raise CheckFailed(f"fingerprint must say running as a boolean, got {running!r}")
        return running

    def owned(self) -> list[dict[str, Any]]:
        """``list_owned``'s objects, held to what the spec needs: each has a string id."""
        raw = self.call("list_owned")
        objects = raw.get("objects")
        if not isinstance(objects, list):
            raise CheckFailed(f"list_owned must print {{objects: [...]}}, got {raw!r:.200}")
        for obj in objects:
            if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not obj["id"]:
                raise CheckFailed(f"an owned object without a string id: {obj!r:.200}")
        return objects

    def ours(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Objects labelled for this node and service, or that start said it created."""
        labelled = [
            o
            for o in objects
            if isinstance(o.get("labels"), dict)
            and o["labels"].get(LABEL_NODE) == self.options.node_id
            and o["labels"].get(LABEL_SERVICE) == self.options.service
        ]
        created = [o for o in objects if o["id"] in self.created and o not in labelled]
        return labelled + created

    def visible_state(self) -> tuple[Any, ...]:
        """What a read-only op must not change: the flags and the owned ids."""
        running, ready = self.flags("status")
        return (running, ready, tuple(sorted(ids(self.owned()))))

    # ------------------------------------------------------------------ what the module left

    def processes_now(self) -> Processes:
        return self.procs.snapshot()

    def processes_settled(self) -> Processes:
        return self.procs.settle()

    def assert_nothing_runs(self, after: str) -> None:
        left = self.processes_settled()
        if left:
            shown = "; ".join(f.describe() for f in list(left.values())[:3])
            raise CheckFailed(f"{len(left)} process(es) the module started run {after}: {shown}")
        busy = [o["id"] for o in self.ours(self.owned()) if o.get("busy") is True]
        if busy:
            raise CheckFailed(f"owned object(s) still busy {after}: {busy[:5]}")

    def data_tree(self) -> dict[str, tuple[int, int]]:
        """Files under the data directory (except tmp/) with size and mtime."""
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

    def clean_up(self) -> list[str]:
        """Leave nothing behind: stop, force-destroy what it reported, kill what survived;
        what had to be killed, for the report."""
        try:
            self.run("stop")
            for obj in self.ours(self.owned()):
                self.run("destroy", obj["id"], "--force")
        except (CheckFailed, ExecError, DocumentError):
            pass
        return self.procs.kill(self.procs.settle())
