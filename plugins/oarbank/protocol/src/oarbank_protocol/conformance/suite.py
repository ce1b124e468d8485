"""The conformance suite: every check of service protocol 1, declared once, in run order.

The class body is the table (``--list`` prints it). The run drives a real service through
its life: stopped → started (twice, no second instance) → ready → owned objects → stopped
*while it runs* (and checked: nothing the module started survives, by process tree and by
``list_owned``) → started again for ``destroy --force`` of a busy object → destroy of what
it reported → a start killed by its timeout, which ``stop`` must still clean up. The checks
at the end look back at every answer and every run.

Checks talk to the module only through the session (:mod:`.session`), which runs the ops
and holds the answers to the spec; what a check remembers for a later one (the first
fingerprint, the start's duration, what was destroyed) lives on the suite.
"""

from __future__ import annotations

import time
from typing import Any, Final

from oarbank_protocol.conformance.checks import (
    SRT_SCHEMA,
    Check,
    CheckFailed,
    CheckSkipped,
    check,
    collect,
)
from oarbank_protocol.conformance.options import RunnerOptions
from oarbank_protocol.conformance.processes import related
from oarbank_protocol.conformance.session import ModuleSession, ids
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
from oarbank_protocol.errors import DocumentError
from oarbank_protocol.execution.executor import ExecResult
from oarbank_protocol.execution.sandbox import ungranted

UNKNOWN_ID: Final = "oarbank-conformance-no-such-object"
UNKNOWN_OP: Final = "oarbank-conformance-no-such-op"
#: When to kill a start on purpose, as fractions of how long a full start took.
KILLED_START_FRACTIONS: Final = (0.5, 0.85)


class ProtocolChecks:
    """The checks, as methods over one run's session (see the module docstring)."""

    def __init__(self, session: ModuleSession, options: RunnerOptions) -> None:
        self.session = session
        self.options = options
        self.first_fingerprint: ExecResult | None = None
        self.start_result: ExecResult | None = None
        self.owned_running: list[dict[str, Any]] = []
        self.destroyed: list[str] = []

    # ------------------------------------------------------------------ fingerprint (probes too)

    @check("SP-001", "fingerprint exits 0 and prints exactly one JSON object in UTF-8", probe=True)
    def fingerprint_output(self) -> str | None:
        result = self.session.run("fingerprint")
        self.first_fingerprint = result
        self.session.ok(result)
        return None

    @check(
        "SP-002",
        "fingerprint says its health and, for a service, whether it is running",
        probe=True,
        needs=(fingerprint_output,),
    )
    def fingerprint_fields(self) -> str | None:
        assert self.first_fingerprint is not None
        raw = parse_json_object(self.first_fingerprint.stdout)
        if not isinstance(raw.get("health"), str):
            raise CheckFailed("fingerprint must report its health")
        if not self.options.probe and not isinstance(raw.get("running"), bool):
            raise CheckFailed("a service's fingerprint must say whether it runs (`running`)")
        return None

    @check(
        "SP-003",
        "fingerprint matches service-fingerprint-1 (health values, field types)",
        source=SRT_SCHEMA,
        probe=True,
        needs=(fingerprint_output,),
    )
    def fingerprint_schema(self) -> str | None:
        assert self.first_fingerprint is not None
        parsed = validate_document(Fingerprint, parse_json_object(self.first_fingerprint.stdout))
        if parsed.unknown_fields:
            return f"unknown fields (allowed): {', '.join(parsed.unknown_fields)}"
        return None

    @check(
        "SP-004",
        "fingerprint answers within its timeout (the manifest's, else 5 s)",
        probe=True,
    )
    def fingerprint_in_time(self) -> str | None:
        result = self.first_fingerprint
        if result is None:
            raise CheckFailed("fingerprint could not be run")
        if result.timed_out:
            raise CheckFailed(f"timed out after {result.timeout_s:g} s")
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
        before_tree = self.session.data_tree()
        before = None if probe else self.session.visible_state()
        for _ in range(3):
            self.session.call("fingerprint")
        after_tree = self.session.data_tree()
        changed = sorted({name for name, _ in set(before_tree.items()) ^ set(after_tree.items())})
        if changed:
            raise CheckFailed(f"fingerprint changed files in the data dir: {changed[:5]}")
        if not probe and self.session.visible_state() != before:
            raise CheckFailed("fingerprint changed what status or list_owned report")
        return None

    # ------------------------------------------------------------------ stopped service

    @check("SP-006", "status of a stopped service says running=false")
    def status_stopped(self) -> str | None:
        running, _ = self.session.flags("status")
        if running:
            raise CheckSkipped("the service was already running before the run; cannot test")
        return None

    @check(
        "SP-007",
        "ready of a stopped service exits 0 with ready=false",
        source=SRT_SCHEMA,
        needs=(status_stopped,),
    )
    def ready_stopped(self) -> str | None:
        _, ready = self.session.flags("ready")
        if ready:
            raise CheckFailed("ready=true for a service that is not running")
        return None

    @check("SP-008", "stop of a stopped service succeeds, repeatedly (idempotent)")
    def stop_stopped(self) -> str | None:
        for _ in range(self.options.repeat):
            self.session.call("stop")
        return None

    # ------------------------------------------------------------------ starting

    @check("SP-009", "start exits 0 within its timeout (the manifest's, else 120 s)")
    def start(self) -> str | None:
        self.session.started = True
        result = self.session.run("start")
        self.start_result = result
        raw = self.session.ok(result)
        created = raw.get("created")
        if isinstance(created, list):
            self.session.created = [c for c in created if isinstance(c, str)]
        return f"{result.duration_s:.2f} s, created {len(self.session.created)} object(s)"

    @check(
        "SP-010",
        "start of a running service succeeds and makes no second instance (by process "
        "tree, owned objects and pid)",
        needs=(start,),
    )
    def start_again(self) -> str | None:
        before = self.session.processes_now()
        objects_before = set(ids(self.session.owned()))
        pid_before = self.session.call("fingerprint").get("pid")
        for _ in range(self.options.repeat - 1):
            self.session.call("start")
        after = self.session.processes_now()
        objects_after = set(ids(self.session.owned()))
        pid_after = self.session.call("fingerprint").get("pid")
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
            raise CheckFailed("a second start made a second instance: " + "; ".join(problems))
        return None

    @check(
        "SP-011",
        "ready becomes true within the readiness deadline (the manifest's ready_timeout_s)",
        needs=(start,),
    )
    def becomes_ready(self) -> str | None:
        deadline = time.monotonic() + self.options.ready_timeout_s
        polls = 0
        while True:
            running, ready = self.session.flags("ready")
            polls += 1
            if ready and running:
                return f"ready after {polls} poll(s)"
            if time.monotonic() >= deadline:
                why = "ready=true while running=false" if ready else "never ready"
                raise CheckFailed(
                    f"not ready within {self.options.ready_timeout_s:g} s ({polls} polls; {why})"
                )
            time.sleep(self.options.ready_poll_s)

    @check("SP-012", "status of the running service says running=true", needs=(becomes_ready,))
    def status_running(self) -> str | None:
        running, _ = self.session.flags("status")
        if not running:
            raise CheckFailed("status says running=false after a successful start")
        return None

    @check("SP-013", "fingerprint says running=true while the service runs", needs=(becomes_ready,))
    def fingerprint_running(self) -> str | None:
        if not self.session.fingerprint_running():
            raise CheckFailed("fingerprint.running is false while the service runs")
        return None

    # ------------------------------------------------------------------ owned objects

    @check("SP-014", "list_owned exits 0 within its timeout with the objects, each with an id")
    def list_owned(self) -> str | None:
        self.owned_running = self.session.owned()
        return f"{len(self.owned_running)} object(s)"

    @check(
        "SP-015",
        "every owned object carries oarbank.attempt_id, oarbank.node and oarbank.service",
        needs=(list_owned,),
    )
    def labels(self) -> str | None:
        if not self.owned_running:
            raise CheckSkipped("list_owned returned no objects")
        bad = [
            o["id"]
            for o in self.owned_running
            if not isinstance(o.get("labels"), dict)
            or not all(
                isinstance(o["labels"].get(k), str) and o["labels"][k] for k in REQUIRED_LABELS
            )
        ]
        if bad:
            raise CheckFailed(f"objects without the three labels: {bad[:5]}")
        return None

    @check(
        "SP-016",
        "owned objects match service-ownedlist-1 (each has a kind; fields typed)",
        source=SRT_SCHEMA,
        needs=(list_owned,),
    )
    def owned_schema(self) -> str | None:
        validate_document(OwnedList, {"objects": self.owned_running})
        return None

    @check(
        "SP-017",
        "list_owned lists every object start reported in `created`",
        source=SRT_SCHEMA,
        needs=(list_owned, start),
    )
    def created_listed(self) -> str | None:
        if not self.session.created:
            raise CheckSkipped("start reported no created objects")
        missing = [i for i in self.session.created if i not in ids(self.owned_running)]
        if missing:
            raise CheckFailed(f"created but not listed: {missing}")
        return None

    @check("SP-018", "destroy of an unknown id succeeds, repeatedly (idempotent)")
    def destroy_unknown(self) -> str | None:
        for _ in range(self.options.repeat):
            self.session.call("destroy", UNKNOWN_ID)
        return None

    @check(
        "SP-019",
        "destroy without --force of a busy object fails and keeps it",
        source=SRT_SCHEMA,
        needs=(list_owned,),
    )
    def destroy_busy_refused(self) -> str | None:
        busy = [o["id"] for o in self.session.ours(self.owned_running) if o.get("busy") is True]
        if not busy:
            raise CheckSkipped("the running service owns no object marked busy")
        result = self.session.run("destroy", busy[0])
        if result.exit_code == 0:
            raise CheckFailed(f"destroy without --force of busy {busy[0]!r} succeeded")
        if busy[0] not in ids(self.session.owned()):
            raise CheckFailed("the refused destroy removed the object anyway")
        return None

    # ------------------------------------------------------------------ stopping a live service

    @check("SP-020", "stop of the running service exits 0 within its timeout", needs=(start,))
    def stop_running(self) -> str | None:
        raw = self.session.call("stop")
        return "escalated" if raw.get("escalated") is True else None

    @check(
        "SP-021",
        "after stop, status, ready and fingerprint all say not running",
        needs=(stop_running,),
    )
    def stopped_everywhere(self) -> str | None:
        problems = []
        if self.session.flags("status")[0]:
            problems.append("status.running")
        if self.session.flags("ready")[1]:
            problems.append("ready.ready")
        if self.session.fingerprint_running():
            problems.append("fingerprint.running")
        if problems:
            raise CheckFailed(f"still true after stop: {', '.join(problems)}")
        return None

    @check(
        "SP-022",
        "after stop nothing the module started runs (process tree) and no owned object is "
        "busy (list_owned)",
        needs=(stop_running,),
    )
    def nothing_survives_stop(self) -> str | None:
        self.session.assert_nothing_runs("after stop")
        return None

    @check(
        "SP-023", "stop of the stopped service succeeds again, repeatedly", needs=(stop_running,)
    )
    def stop_again(self) -> str | None:
        for _ in range(self.options.repeat):
            self.session.call("stop")
        self.session.started = False
        return None

    # ------------------------------------------------------------------ destroying

    @check(
        "SP-024",
        "destroy --force removes a busy object of a running service",
        needs=(start, stop_running),
    )
    def destroy_force_busy(self) -> str | None:
        self.session.started = True
        self.session.call("start")
        busy = [o["id"] for o in self.session.ours(self.session.owned()) if o.get("busy") is True]
        if not busy:
            self.session.stop_quietly()
            raise CheckSkipped("the running service owns no object marked busy")
        self.session.call("destroy", busy[0], "--force")
        self.destroyed.append(busy[0])
        still = busy[0] in ids(self.session.owned())
        if still:
            self.session.stop_quietly()
            raise CheckFailed(f"{busy[0]!r} still listed after destroy --force")
        return None

    @check("SP-025", "destroy of a reported object removes it from list_owned")
    def destroy_removes(self) -> str | None:
        targets = [
            o["id"] for o in self.session.ours(self.session.owned()) if o.get("busy") is not True
        ]
        if not targets and self.session.started:
            self.session.stop_quietly()
            targets = [
                o["id"]
                for o in self.session.ours(self.session.owned())
                if o.get("busy") is not True
            ]
        self.session.stop_quietly()
        if not targets:
            raise CheckSkipped("the module reported no object to destroy")
        for object_id in targets:
            self.session.call("destroy", object_id)
            self.destroyed.append(object_id)
        left = [i for i in targets if i in ids(self.session.owned())]
        if left:
            raise CheckFailed(f"destroy exited 0 but list_owned still shows {left[:5]}")
        return f"{len(targets)} destroyed"

    @check("SP-026", "destroy of an already destroyed id succeeds, repeatedly")
    def destroy_destroyed(self) -> str | None:
        if not self.destroyed:
            raise CheckSkipped("nothing was destroyed")
        for _ in range(self.options.repeat):
            self.session.call("destroy", self.destroyed[0])
        return None

    @check(
        "SP-027",
        "a start killed by its timeout leaves nothing running once stop has run",
        needs=(start, stop_running),
    )
    def killed_start_is_cleaned_up(self) -> str | None:
        assert self.start_result is not None
        full = self.start_result.duration_s
        interrupted = 0
        for fraction in KILLED_START_FRACTIONS:
            timeout = max(full * fraction, 0.02)
            self.session.started = True
            result = self.session.run("start", timeout_s=timeout)
            if result.timed_out:
                interrupted += 1
            self.session.call("stop")
            self.session.started = False
            self.session.assert_nothing_runs(f"after a start killed at {timeout:.2f} s and a stop")
        if not interrupted:
            raise CheckSkipped(f"start ({full:.2f} s) finished before every timeout tried")
        return f"{interrupted} start(s) killed part-way"

    # ------------------------------------------------------------------ whole-run checks

    @check("SP-028", "an unknown operation fails (non-zero exit)")
    def unknown_op(self) -> str | None:
        if self.session.run(UNKNOWN_OP).exit_code == 0:
            raise CheckFailed("an unknown operation exited 0")
        return None

    @check("SP-029", "no status or ready answer said ready=true with running=false")
    def ready_implies_running(self) -> str | None:
        bad = [
            op
            for op, raw in self.session.statuses
            if raw.get("ready") is True and not raw.get("running")
        ]
        if bad:
            raise CheckFailed(
                f"{len(bad)} answer(s) ready without running (ops: {sorted(set(bad))})"
            )
        return f"{len(self.session.statuses)} answer(s)"

    @check(
        "SP-030",
        "every non-zero exit printed an error document {code, msg} or nothing",
        source=SRT_SCHEMA,
    )
    def error_documents(self) -> str | None:
        offenders = []
        for result in self.session.runs:
            if result.exit_code in (0, None) or result.timed_out or not result.stdout.strip():
                continue
            try:
                validate_document(ErrorDocument, parse_json_object(result.stdout))
            except DocumentError as exc:
                offenders.append(f"{' '.join(result.argv[-2:])}: {exc}")
        if offenders:
            raise CheckFailed("; ".join(offenders[:3]))
        return f"{sum(1 for r in self.session.runs if r.exit_code)} non-zero exit(s) checked"

    @check(
        "SP-031",
        "no op left a process holding its stdout/stderr after it exited",
        source=SRT_SCHEMA,
        probe=True,
    )
    def stdio_detached(self) -> str | None:
        held = [r.op for r in self.session.runs if r.pipe_held and not r.timed_out]
        if held:
            raise CheckFailed(
                f"stdout/stderr still open after exit for: {sorted(set(held))} "
                "(daemons must detach their stdio)"
            )
        return f"{len(self.session.runs)} run(s)"

    # ------------------------------------------------------------------ what the agent relies on

    @check(
        "SP-032",
        "owned objects created by start are labelled for this node and this service "
        "(OARBANK_NODE_ID, OARBANK_SERVICE): the agent reaps no others",
        needs=(list_owned, labels),
    )
    def labels_name_us(self) -> str | None:
        created = [o for o in self.owned_running if o["id"] in self.session.created]
        if not created:
            raise CheckSkipped("start reported no created objects")
        wrong = [
            f"{o['id']} (node {o['labels'].get(LABEL_NODE)!r}, "
            f"service {o['labels'].get(LABEL_SERVICE)!r})"
            for o in created
            if o["labels"].get(LABEL_NODE) != self.options.node_id
            or o["labels"].get(LABEL_SERVICE) != self.options.service
        ]
        if wrong:
            raise CheckFailed(
                f"labelled for another node or service, so never reaped: {wrong[:3]} "
                f"(expected node {self.options.node_id!r}, service {self.options.service!r})"
            )
        return None

    @check(
        "SP-033",
        "a reserves_host_memory service's fingerprint says what it reserves while it runs "
        "(reserve.mem_gb > 0): the node's memory is charged with it",
        needs=(becomes_ready,),
    )
    def reserve_reported(self) -> str | None:
        if not self.options.reserves_host_memory:
            raise CheckSkipped("the manifest does not set reserves_host_memory")
        self.running_again()
        raw = self.session.call("fingerprint")
        self.session.stop_quietly()
        reserve = raw.get("reserve")
        gb = reserve.get("mem_gb") if isinstance(reserve, dict) else None
        if not isinstance(gb, int | float) or isinstance(gb, bool) or not gb > 0:
            raise CheckFailed(
                f"fingerprint.reserve.mem_gb is {gb!r} while the service runs: the agent "
                "would charge nothing for it, protecting nothing"
            )
        return f"{gb:g} GB"

    @check(
        "SP-034",
        "a yieldable service becomes ready again when started after a stop (a yield "
        "ends in a resume)",
        needs=(start, stop_running),
    )
    def resumes_after_stop(self) -> str | None:
        if not self.options.yieldable:
            raise CheckSkipped("the manifest does not set yieldable")
        try:
            self.running_again()
        finally:
            self.session.stop_quietly()
        return None

    @check(
        "SP-035",
        "the module's sandbox asks only for grants the site approves (paths, network, tools)",
        probe=True,
    )
    def sandbox_grants(self) -> str | None:
        spec = self.options.sandbox
        if spec is None:
            return "no sandbox declared: nothing to approve (the module runs unconfined)"
        problems = ungranted(spec, self.options.site, self.options.tools)
        if problems:
            raise CheckFailed("not approved (the module ran without them): " + "; ".join(problems))
        if self.options.site.bwrap is None:
            return "approved, but bubblewrap is missing here: the module ran unconfined"
        return "confined with bubblewrap"

    def running_again(self) -> None:
        """Start the (stopped) service and wait for ready, for the checks that need it up
        after the run's own start and stop."""
        self.session.started = True
        self.session.call("start")
        deadline = time.monotonic() + self.options.ready_timeout_s
        while True:
            running, ready = self.session.flags("ready")
            if ready and running:
                return
            if time.monotonic() >= deadline:
                self.session.stop_quietly()
                raise CheckFailed(
                    f"not ready within {self.options.ready_timeout_s:g} s of a start after a stop"
                )
            time.sleep(self.options.ready_poll_s)


CHECKS: Final[tuple[Check, ...]] = collect(ProtocolChecks)
CHECK_BY_ID: Final = {c.id: c for c in CHECKS}
