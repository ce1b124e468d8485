"""Conformance runner for service protocol 1 (csi-sanity style).

Every requirement is one check declared below with :func:`~.checks.check` (its id, title,
source and prerequisites written once); the class body is the table, in run order. The run
drives a real service through its life: stopped → started (twice, no second instance) →
ready → owned objects → stopped *while it runs* (and checked: nothing the module started
survives, by process tree and by ``list_owned``) → started again for ``destroy --force`` of a
busy object → destroy of what it reported → a start killed by its timeout, which ``stop``
must still clean up.

It is destructive on purpose (it starts, stops and destroys): point it at a test
installation. It runs the executable exactly as the agent does (the same environment, cwd
the bundle root, the manifest's names and timeouts when ``--bundle`` holds one), with a
throw-away data directory unless ``--data`` is given, and leaves nothing running: at the
end it stops the service, force-destroys every object it reported, and kills (and reports)
what a broken module left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from oarbank_protocol.conformance.checks import SRT_SCHEMA, Check, check, collect
from oarbank_protocol.conformance.processes import Found, ModuleProcesses, related
from oarbank_protocol.documents import (
    LABEL_NODE,
    LABEL_SERVICE,
    REQUIRED_LABELS,
    ErrorDocument,
    Fingerprint,
    OwnedList,
    parse_json_object,
    validate_document,
)
from oarbank_protocol.errors import DocumentError, ExecError
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.execution.executor import ExecResult, Executor

Outcome = Literal["pass", "fail", "skip"]

UNKNOWN_ID: Final = "oarbank-conformance-no-such-object"
UNKNOWN_OP: Final = "oarbank-conformance-no-such-op"
#: When to kill a start on purpose, as fractions of how long a full start took.
KILLED_START_FRACTIONS: Final = (0.5, 0.85)


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
    spec_only: bool = False
    platform: str | None = None


def _ids(objects: list[dict[str, Any]]) -> list[str]:
    return [o["id"] for o in objects]


class ConformanceRunner:
    """Runs the checks in order; a check whose prerequisite did not pass is skipped."""

    def __init__(self, exec_argv: Sequence[str], options: RunnerOptions | None = None) -> None:
        self.exec_argv = list(exec_argv)
        self.options = options or RunnerOptions()
        self.results: list[CheckResult] = []
        self.runs: list[ExecResult] = []
        self.notes: list[str] = []
        self.executor: Executor | None = None
        self.procs: ModuleProcesses | None = None
        self._first_fingerprint: ExecResult | None = None
        self._start: ExecResult | None = None
        self._started = False
        self._created: list[str] = []
        self._owned_running: list[dict[str, Any]] = []
        self._destroyed: list[str] = []
        self._statuses: list[tuple[str, dict[str, Any]]] = []

    # ------------------------------------------------------------------ plumbing

    def _run(self, op: str, *args: str, timeout_s: float | None = None) -> ExecResult:
        assert self.executor is not None
        assert self.procs is not None
        result = self.executor.run_raw_sync(op, *args, timeout_s=timeout_s)
        self.runs.append(result)
        self.procs.op_ran(result.pid)
        return result

    def _ok(self, result: ExecResult) -> dict[str, Any]:
        """The JSON object a successful run printed, or a failure naming what is wrong."""
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
            return parse_json_object(result.stdout)
        except DocumentError as exc:
            raise _CheckFailed(f"`{result.op}`: {exc}") from None

    def _call(self, op: str, *args: str) -> dict[str, Any]:
        return self._ok(self._run(op, *args))

    def _flags(self, op: str) -> tuple[bool, bool]:
        """(running, ready) from ``status`` or ``ready``: the spec's two flags, as booleans."""
        raw = self._call(op)
        self._statuses.append((op, raw))
        running, ready = raw.get("running"), raw.get("ready")
        if not isinstance(running, bool) or not isinstance(ready, bool):
            raise _CheckFailed(f"`{op}` must say running and ready as booleans, got {raw!r:.200}")
        return running, ready

    def _fingerprint_running(self) -> bool:
        raw = self._call("fingerprint")
        running = raw.get("running")
        if not isinstance(running, bool):
            raise _CheckFailed(f"fingerprint must say running as a boolean, got {running!r}")
        return running

    def _owned(self) -> list[dict[str, Any]]:
        """``list_owned``'s objects, held to what the spec needs: each has a string id."""
        raw = self._call("list_owned")
        objects = raw.get("objects")
        if not isinstance(objects, list):
            raise _CheckFailed(f"list_owned must print {{objects: [...]}}, got {raw!r:.200}")
        for obj in objects:
            if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not obj["id"]:
                raise _CheckFailed(f"an owned object without a string id: {obj!r:.200}")
        return objects

    def _ours(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Objects labelled for this node and service, or that start said it created."""
        labelled = [
            o
            for o in objects
            if isinstance(o.get("labels"), dict)
            and o["labels"].get(LABEL_NODE) == self.options.node_id
            and o["labels"].get(LABEL_SERVICE) == self.options.service
        ]
        created = [o for o in objects if o["id"] in self._created and o not in labelled]
        return labelled + created

    def _module_processes(self) -> dict[tuple[int, int], Found]:
        assert self.procs is not None
        return self.procs.settle()

    def _assert_nothing_runs(self, after: str) -> None:
        left = self._module_processes()
        if left:
            shown = "; ".join(f.describe() for f in list(left.values())[:3])
            raise _CheckFailed(f"{len(left)} process(es) the module started run {after}: {shown}")
        busy = [o["id"] for o in self._ours(self._owned()) if o.get("busy") is True]
        if busy:
            raise _CheckFailed(f"owned object(s) still busy {after}: {busy[:5]}")

    def _outcome(self, item: Check) -> Outcome | None:
        for result in self.results:
            if result.check is item:
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

    def _visible_state(self) -> tuple[Any, ...]:
        running, ready = self._flags("status")
        return (running, ready, tuple(sorted(_ids(self._owned()))))

    # ------------------------------------------------------------------ the run

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
        context = ExecContext(
            bundle_root=opts.bundle_root.resolve(),
            module=opts.module,
            node_id=opts.node_id,
            data_dir=data_dir.resolve(),
            settings=opts.settings,
            **context_kwargs,
        )
        self.procs = ModuleProcesses(context.data_dir)
        try:
            self.executor = Executor(
                self.exec_argv, context, service=opts.service, timeouts=opts.timeouts
            )
            for item in CHECKS:
                if opts.probe and not item.probe:
                    continue
                self._check(item)
        finally:
            self._cleanup()
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        return self.results

    def _check(self, item: Check) -> None:
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
            note = item(self) or ""
        except _Skip as exc:
            outcome, note = "skip", str(exc)
        except (_CheckFailed, ExecError, DocumentError) as exc:
            outcome, note = "fail", str(exc)
        self.results.append(CheckResult(item, outcome, note, time.monotonic() - began))

    # ------------------------------------------------------------------ fingerprint (probes too)

    @check("SP-001", "fingerprint exits 0 and prints exactly one JSON object in UTF-8", probe=True)
    def fingerprint_output(self) -> str | None:
        result = self._run("fingerprint")
        self._first_fingerprint = result
        self._ok(result)
        return None

    @check(
        "SP-002",
        "fingerprint says its health and, for a service, whether it is running",
        probe=True,
        needs=(fingerprint_output,),
    )
    def fingerprint_fields(self) -> str | None:
        assert self._first_fingerprint is not None
        raw = parse_json_object(self._first_fingerprint.stdout)
        if not isinstance(raw.get("health"), str):
            raise _CheckFailed("fingerprint must report its health")
        if not self.options.probe and not isinstance(raw.get("running"), bool):
            raise _CheckFailed("a service's fingerprint must say whether it runs (`running`)")
        return None

    @check(
        "SP-003",
        "fingerprint matches service-fingerprint-1 (health values, field types)",
        source=SRT_SCHEMA,
        probe=True,
        needs=(fingerprint_output,),
    )
    def fingerprint_schema(self) -> str | None:
        assert self._first_fingerprint is not None
        parsed = validate_document(Fingerprint, parse_json_object(self._first_fingerprint.stdout))
        if parsed.unknown_fields:
            return f"unknown fields (allowed): {', '.join(parsed.unknown_fields)}"
        return None

    @check(
        "SP-004",
        "fingerprint answers within its timeout (the manifest's, else 5 s)",
        probe=True,
    )
    def fingerprint_in_time(self) -> str | None:
        result = self._first_fingerprint
        if result is None:
            raise _CheckFailed("fingerprint could not be run")
        if result.timed_out:
            raise _CheckFailed(f"timed out after {result.timeout_s:g} s")
        return f"{result.duration_s:.3f} s of {result.timeout_s:g} s"

    @check(
        "SP-005",
        "fingerprint is read-only: repeated calls change no file and nothing status or "
        "list_owned report",
        probe=True,
        needs=(fingerprint_output,),
    )
    def fingerprint_read_only(self) -> str | None:
        probe = self.options.probe
        before_tree = self._tree()
        before = None if probe else self._visible_state()
        for _ in range(3):
            self._call("fingerprint")
        after_tree = self._tree()
        changed = sorted({name for name, _ in set(before_tree.items()) ^ set(after_tree.items())})
        if changed:
            raise _CheckFailed(f"fingerprint changed files in the data dir: {changed[:5]}")
        if not probe and self._visible_state() != before:
            raise _CheckFailed("fingerprint changed what status or list_owned report")
        return None

    # ------------------------------------------------------------------ stopped service

    @check("SP-006", "status of a stopped service says running=false")
    def status_stopped(self) -> str | None:
        running, _ = self._flags("status")
        if running:
            raise _Skip("the service was already running before the run; cannot test")
        return None

    @check(
        "SP-007",
        "ready of a stopped service exits 0 with ready=false",
        source=SRT_SCHEMA,
        needs=(status_stopped,),
    )
    def ready_stopped(self) -> str | None:
        _, ready = self._flags("ready")
        if ready:
            raise _CheckFailed("ready=true for a service that is not running")
        return None

    @check("SP-008", "stop of a stopped service succeeds, repeatedly (idempotent)")
    def stop_stopped(self) -> str | None:
        for _ in range(self.options.repeat):
            self._call("stop")
        return None

    # ------------------------------------------------------------------ starting

    @check("SP-009", "start exits 0 within its timeout (the manifest's, else 120 s)")
    def start(self) -> str | None:
        self._started = True
        result = self._run("start")
        self._start = result
        raw = self._ok(result)
        created = raw.get("created")
        if isinstance(created, list):
            self._created = [c for c in created if isinstance(c, str)]
        return f"{result.duration_s:.2f} s, created {len(self._created)} object(s)"

    @check(
        "SP-010",
        "start of a running service succeeds and makes no second instance (by process "
        "tree, owned objects and pid)",
        needs=(start,),
    )
    def start_again(self) -> str | None:
        before = self._module_processes_now()
        objects_before = set(_ids(self._owned()))
        pid_before = self._call("fingerprint").get("pid")
        for _ in range(self.options.repeat - 1):
            self._call("start")
        after = self._module_processes_now()
        objects_after = set(_ids(self._owned()))
        pid_after = self._call("fingerprint").get("pid")
        extra = [f for key, f in after.items() if key not in before and not related(f, before)]
        problems = []
        if extra:
            problems.append(
                "new process(es) outside the running instance: "
                + "; ".join(f.describe() for f in extra[:3])
            )
        if objects_after - objects_before:
            problems.append(f"new owned object(s): {sorted(objects_after - objects_before)[:5]}")
        if pid_before is not None and pid_after is not None and pid_before != pid_after:
            problems.append(f"the service pid changed ({pid_before} → {pid_after})")
        if problems:
            raise _CheckFailed("a second start made a second instance: " + "; ".join(problems))
        return None

    def _module_processes_now(self) -> dict[tuple[int, int], Found]:
        assert self.procs is not None
        return self.procs.snapshot()

    @check(
        "SP-011",
        "ready becomes true within the readiness deadline (the manifest's ready_timeout_s)",
        needs=(start,),
    )
    def becomes_ready(self) -> str | None:
        deadline = time.monotonic() + self.options.ready_timeout_s
        polls = 0
        while True:
            running, ready = self._flags("ready")
            polls += 1
            if ready and running:
                return f"ready after {polls} poll(s)"
            if time.monotonic() >= deadline:
                why = "ready=true while running=false" if ready else "never ready"
                raise _CheckFailed(
                    f"not ready within {self.options.ready_timeout_s:g} s ({polls} polls; {why})"
                )
            time.sleep(self.options.ready_poll_s)

    @check("SP-012", "status of the running service says running=true", needs=(becomes_ready,))
    def status_running(self) -> str | None:
        running, _ = self._flags("status")
        if not running:
            raise _CheckFailed("status says running=false after a successful start")
        return None

    @check("SP-013", "fingerprint says running=true while the service runs", needs=(becomes_ready,))
    def fingerprint_running(self) -> str | None:
        if not self._fingerprint_running():
            raise _CheckFailed("fingerprint.running is false while the service runs")
        return None

    # ------------------------------------------------------------------ owned objects

    @check("SP-014", "list_owned exits 0 within its timeout with the objects, each with an id")
    def list_owned(self) -> str | None:
        self._owned_running = self._owned()
        return f"{len(self._owned_running)} object(s)"

    @check(
        "SP-015",
        "every owned object carries oarbank.attempt_id, oarbank.node and oarbank.service",
        needs=(list_owned,),
    )
    def labels(self) -> str | None:
        if not self._owned_running:
            raise _Skip("list_owned returned no objects")
        bad = [
            o["id"]
            for o in self._owned_running
            if not isinstance(o.get("labels"), dict)
            or not all(
                isinstance(o["labels"].get(k), str) and o["labels"][k] for k in REQUIRED_LABELS
            )
        ]
        if bad:
            raise _CheckFailed(f"objects without the three labels: {bad[:5]}")
        return None

    @check(
        "SP-016",
        "owned objects match service-ownedlist-1 (each has a kind; fields typed)",
        source=SRT_SCHEMA,
        needs=(list_owned,),
    )
    def owned_schema(self) -> str | None:
        validate_document(OwnedList, {"objects": self._owned_running})
        return None

    @check(
        "SP-017",
        "list_owned lists every object start reported in `created`",
        source=SRT_SCHEMA,
        needs=(list_owned, start),
    )
    def created_listed(self) -> str | None:
        if not self._created:
            raise _Skip("start reported no created objects")
        missing = [i for i in self._created if i not in _ids(self._owned_running)]
        if missing:
            raise _CheckFailed(f"created but not listed: {missing}")
        return None

    @check("SP-018", "destroy of an unknown id succeeds, repeatedly (idempotent)")
    def destroy_unknown(self) -> str | None:
        for _ in range(self.options.repeat):
            self._call("destroy", UNKNOWN_ID)
        return None

    @check(
        "SP-019",
        "destroy without --force of a busy object fails and keeps it",
        source=SRT_SCHEMA,
        needs=(list_owned,),
    )
    def destroy_busy_refused(self) -> str | None:
        busy = [o["id"] for o in self._ours(self._owned_running) if o.get("busy") is True]
        if not busy:
            raise _Skip("the running service owns no object marked busy")
        result = self._run("destroy", busy[0])
        if result.exit_code == 0:
            raise _CheckFailed(f"destroy without --force of busy {busy[0]!r} succeeded")
        if busy[0] not in _ids(self._owned()):
            raise _CheckFailed("the refused destroy removed the object anyway")
        return None

    # ------------------------------------------------------------------ stopping a live service

    @check("SP-020", "stop of the running service exits 0 within its timeout", needs=(start,))
    def stop_running(self) -> str | None:
        raw = self._call("stop")
        return "escalated" if raw.get("escalated") is True else None

    @check(
        "SP-021",
        "after stop, status, ready and fingerprint all say not running",
        needs=(stop_running,),
    )
    def stopped_everywhere(self) -> str | None:
        problems = []
        if self._flags("status")[0]:
            problems.append("status.running")
        if self._flags("ready")[1]:
            problems.append("ready.ready")
        if self._fingerprint_running():
            problems.append("fingerprint.running")
        if problems:
            raise _CheckFailed(f"still true after stop: {', '.join(problems)}")
        return None

    @check(
        "SP-022",
        "after stop nothing the module started runs (process tree) and no owned object is "
        "busy (list_owned)",
        needs=(stop_running,),
    )
    def nothing_survives_stop(self) -> str | None:
        self._assert_nothing_runs("after stop")
        return None

    @check(
        "SP-023", "stop of the stopped service succeeds again, repeatedly", needs=(stop_running,)
    )
    def stop_again(self) -> str | None:
        for _ in range(self.options.repeat):
            self._call("stop")
        self._started = False
        return None

    # ------------------------------------------------------------------ destroying

    @check(
        "SP-024",
        "destroy --force removes a busy object of a running service",
        needs=(start, stop_running),
    )
    def destroy_force_busy(self) -> str | None:
        self._started = True
        self._call("start")
        busy = [o["id"] for o in self._ours(self._owned()) if o.get("busy") is True]
        if not busy:
            self._stop_quietly()
            raise _Skip("the running service owns no object marked busy")
        self._call("destroy", busy[0], "--force")
        self._destroyed.append(busy[0])
        still = busy[0] in _ids(self._owned())
        if still:
            self._stop_quietly()
            raise _CheckFailed(f"{busy[0]!r} still listed after destroy --force")
        return None

    @check("SP-025", "destroy of a reported object removes it from list_owned")
    def destroy_removes(self) -> str | None:
        targets = [o["id"] for o in self._ours(self._owned()) if o.get("busy") is not True]
        if not targets and self._started:
            self._stop_quietly()
            targets = [o["id"] for o in self._ours(self._owned()) if o.get("busy") is not True]
        self._stop_quietly()
        if not targets:
            raise _Skip("the module reported no object to destroy")
        for object_id in targets:
            self._call("destroy", object_id)
            self._destroyed.append(object_id)
        left = [i for i in targets if i in _ids(self._owned())]
        if left:
            raise _CheckFailed(f"destroy exited 0 but list_owned still shows {left[:5]}")
        return f"{len(targets)} destroyed"

    @check("SP-026", "destroy of an already destroyed id succeeds, repeatedly")
    def destroy_destroyed(self) -> str | None:
        if not self._destroyed:
            raise _Skip("nothing was destroyed")
        for _ in range(self.options.repeat):
            self._call("destroy", self._destroyed[0])
        return None

    @check(
        "SP-027",
        "a start killed by its timeout leaves nothing running once stop has run",
        needs=(start, stop_running),
    )
    def killed_start_is_cleaned_up(self) -> str | None:
        assert self._start is not None
        full = self._start.duration_s
        interrupted = 0
        for fraction in KILLED_START_FRACTIONS:
            timeout = max(full * fraction, 0.02)
            self._started = True
            result = self._run("start", timeout_s=timeout)
            if result.timed_out:
                interrupted += 1
            self._call("stop")
            self._started = False
            self._assert_nothing_runs(f"after a start killed at {timeout:.2f} s and a stop")
        if not interrupted:
            raise _Skip(f"start ({full:.2f} s) finished before every timeout tried")
        return f"{interrupted} start(s) killed part-way"

    # ------------------------------------------------------------------ whole-run checks

    @check("SP-028", "an unknown operation fails (non-zero exit)")
    def unknown_op(self) -> str | None:
        if self._run(UNKNOWN_OP).exit_code == 0:
            raise _CheckFailed("an unknown operation exited 0")
        return None

    @check("SP-029", "no status or ready answer said ready=true with running=false")
    def ready_implies_running(self) -> str | None:
        bad = [
            op for op, raw in self._statuses if raw.get("ready") is True and not raw.get("running")
        ]
        if bad:
            raise _CheckFailed(
                f"{len(bad)} answer(s) ready without running (ops: {sorted(set(bad))})"
            )
        return f"{len(self._statuses)} answer(s)"

    @check(
        "SP-030",
        "every non-zero exit printed an error document {code, msg} or nothing",
        source=SRT_SCHEMA,
    )
    def error_documents(self) -> str | None:
        offenders = []
        for result in self.runs:
            if result.exit_code in (0, None) or result.timed_out or not result.stdout.strip():
                continue
            try:
                validate_document(ErrorDocument, parse_json_object(result.stdout))
            except DocumentError as exc:
                offenders.append(f"{' '.join(result.argv[-2:])}: {exc}")
        if offenders:
            raise _CheckFailed("; ".join(offenders[:3]))
        return f"{sum(1 for r in self.runs if r.exit_code)} non-zero exit(s) checked"

    @check(
        "SP-031",
        "no op left a process holding its stdout/stderr after it exited",
        source=SRT_SCHEMA,
        probe=True,
    )
    def stdio_detached(self) -> str | None:
        held = [r.op for r in self.runs if r.pipe_held and not r.timed_out]
        if held:
            raise _CheckFailed(
                f"stdout/stderr still open after exit for: {sorted(set(held))} "
                "(daemons must detach their stdio)"
            )
        return f"{len(self.runs)} run(s)"

    # ------------------------------------------------------------------ cleanup

    def _stop_quietly(self) -> None:
        try:
            self._run("stop")
        except ExecError:
            pass
        self._started = False

    def _cleanup(self) -> None:
        """Leave nothing behind: stop, force-destroy what it reported, kill what survived."""
        if self.executor is None or self.procs is None or self.options.probe:
            return
        try:
            self._run("stop")
            for obj in self._ours(self._owned()):
                self._run("destroy", obj["id"], "--force")
        except (_CheckFailed, ExecError, DocumentError):
            pass
        killed = self.procs.kill(self.procs.settle())
        if killed:
            self.notes.append("killed what the module left running: " + "; ".join(killed[:5]))


CHECKS: Final[tuple[Check, ...]] = collect(ConformanceRunner)
CHECK_BY_ID: Final = {c.id: c for c in CHECKS}
