"""What an instance's exit means, decided the moment SIGCHLD reports it.

* before readiness: the readiness wait reports it (the phase fails, whatever the code);
* the benchmark: the job ends with its code;
* a terminal service: the job ends when every terminal instance has exited (worst code
  wins); a terminal critical one that fails ends it at once;
* a critical unit after readiness: the job fails;
* a non-critical service: recorded, then the restart policy decides (:mod:`.restarting`).

An exit srt asked for (the teardown, ``srt stop JOBDIR SERVICE``, ``srt restart``) is
only recorded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from srt_services.contracts.servers import EXIT_REASON_FILE, UNAVAILABLE_FILE
from srt_services.jobdir.cause import StopCause, StopKind, death_signal
from srt_services.supervise.runs import InstanceRun, JobRun, RequestStop, describe_code

if TYPE_CHECKING:
    from srt_services.supervise.journal import Journal


class Exits:
    def __init__(
        self,
        run: JobRun,
        journal: Journal,
        request_stop: RequestStop,
        after_noncritical: Callable[[InstanceRun, int], None],
    ) -> None:
        self.run = run
        self.journal = journal
        self.request_stop = request_stop
        #: the restart policy's turn (a non-critical service exited after it was ready)
        self.after_noncritical = after_noncritical

    def on_exit(self, inst: InstanceRun, code: int) -> None:
        self._record(inst, code)
        if self.run.stopping or inst.held is not None:
            inst.state = "stopped"
            return
        if self._unavailable(inst):
            return
        was = inst.state
        inst.state = "exited" if code == 0 else "failed"
        if was == "starting" and inst.planned.readiness is not None:
            return  # the readiness wait reports it
        if was == "failed":
            # a wait that gave up on it (a fleet that did not form) stopped it and reports
            # why; on Slurm its exit can arrive before that report does
            return
        u = inst.unit.planned
        if u.category == "benchmark":
            self._benchmark_exited(inst, code)
        elif u.terminal:
            self._terminal_exited(inst, code)
        elif u.critical:
            self._critical_exited(inst, code)
        else:
            self.after_noncritical(inst, code)

    def _unavailable(self, inst: InstanceRun) -> bool:
        """A non-critical instance whose node lacks what it runs (the look-up on the node
        left its reason in the work directory): ``unavailable``, never restarted, and the
        job goes on without it. A critical one fails as any other exit does."""
        u = inst.unit.planned
        if u.critical or u.terminal or u.category != "service":
            return False
        p = inst.planned
        try:
            with open(os.path.join(p.work_dir, UNAVAILABLE_FILE), encoding="utf-8") as fh:
                reason = fh.read().strip() or "not available on this node"
        except OSError:
            return False
        inst.state = "unavailable"
        inst.unavailable = reason
        self.journal.emit("unavailable", step=p.step, unit=p.unit, node=p.node, reason=reason)
        self.journal.mark_dirty()
        return True

    def _record(self, inst: InstanceRun, code: int) -> None:
        if inst.handle is not None:
            inst.handle.returncode = code
            if inst.handle.exit_reason is None and code != 0:
                inst.handle.exit_reason = stated_reason(inst.planned.work_dir)
        inst.exit_code = code
        if inst.exit_fut is not None and not inst.exit_fut.done():
            inst.exit_fut.set_result(code)
        if inst.liveness is not None:
            inst.liveness.cancel()
            inst.liveness = None
        p = inst.planned
        self.journal.scrape_targets.stopped(p.step)
        self.journal.emit(
            "exited",
            step=p.step,
            unit=p.unit,
            node=p.node,
            code=code,
            signal=death_signal(code),
            attempt=inst.attempt,
            reason=inst.handle.exit_reason if inst.handle is not None else None,
        )
        self.journal.mark_dirty()

    def _benchmark_exited(self, inst: InstanceRun, code: int) -> None:
        """The benchmark's exit ends the job with its code."""
        said = inst.handle.exit_reason if inst.handle is not None else None
        reason = "benchmark finished" if code == 0 else f"benchmark failed ({describe_code(code)})"
        if code != 0 and said:
            reason += f": {said}"
        cause = StopCause.process_exit(
            StopKind.BENCHMARK_EXIT, code, reason, unit=inst.unit.name, node=inst.planned.node
        )
        self.request_stop(cause, code)

    def _terminal_exited(self, inst: InstanceRun, code: int) -> None:
        """A terminal critical service that failed ends the job; otherwise the job ends
        when every terminal instance has exited."""
        if inst.unit.planned.critical and code != 0:
            p = inst.planned
            message = f"terminal critical {inst.label} failed on {p.node} ({describe_code(code)})"
            self.request_stop(critical_exit(inst, code, message), code)
            return
        self._check_terminal_done()

    def _critical_exited(self, inst: InstanceRun, code: int) -> None:
        """A critical unit exited after it was ready: the job fails."""
        p = inst.planned
        reason = inst.killed_for or (inst.handle.exit_reason if inst.handle else None)
        why = f" ({reason})" if reason else ""
        message = (
            f"critical {inst.label} exited on {p.node} after it was ready"
            f" ({describe_code(code)}){why}"
        )
        self.request_stop(critical_exit(inst, code, message, reason), 1)

    def _check_terminal_done(self) -> None:
        terminal = [i for u in self.run.units.values() if u.planned.terminal for i in u.instances]
        if not terminal or any(i.exit_code is None for i in terminal):
            return
        worst = max((i.exit_code or 0) for i in terminal)
        detail = (
            "terminal services finished"
            if worst == 0
            else f"terminal services failed (worst {describe_code(worst)})"
        )
        self.request_stop(StopCause(StopKind.TERMINAL_EXIT, detail, code=worst), worst)


def stated_reason(work_dir: str) -> str | None:
    """What a failed process said about why (:data:`EXIT_REASON_FILE`): its first line,
    cut short, or ``None`` when it wrote nothing."""
    try:
        with open(
            os.path.join(work_dir, EXIT_REASON_FILE), encoding="utf-8", errors="replace"
        ) as fh:
            text = fh.read(2000)
    except OSError:
        return None
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line[:500] or None


def critical_exit(
    inst: InstanceRun, code: int, message: str, reason: str | None = None
) -> StopCause:
    """A critical instance's exit as the job's stop cause (where: its unit, step and node)."""
    p = inst.planned
    return StopCause.process_exit(
        StopKind.CRITICAL_SERVICE_EXIT,
        code,
        message,
        unit=inst.unit.name,
        step=p.step,
        node=p.node,
        reason=reason,
    )
