"""What the orchestrator does on a signal.

SIGTERM and SIGINT stop the job (a second one while stopping: kill at once); one sent by
``srt stop`` finds its stop request in the job directory and the job ends as stopped by
the user. SIGHUP is a terminal that went away: the job goes on. SIGUSR1 writes every
pending coroutine's stack to ``debug-tasks.txt``, for a job that seems to hang.

The job ends once, for its first cause: a stop that arrives after the job's own end was
decided (the benchmark exited while ``srt stop`` was on its way) changes neither the exit
status nor the record; its request is taken out of the job directory and the ``signal``
event says it came too late. After the job's end, until ``srt run`` exits with the job's
code, a stop signal is absorbed the same way (:func:`absorb_late_stops`) instead of killing
``srt run`` with 143 over a job that succeeded.

Stop signals are Python-level handlers, not asyncio's: asyncio dispatches a signal from
the byte its C handler writes to the loop's wake-up socket, and a storm of SIGCHLD (2,000
forks in a job, the orchestrator being their subreaper) fills that socket, so a SIGTERM's
byte could be dropped and the stop lost, each dropped byte printing "Exception ignored
... signal wakeup fd". A Python handler runs from the interpreter's own flag, never lost;
the wake-up socket only wakes the loop, and a full one is already awake, so its warning
is switched off.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
from typing import Any

from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.stop_request import take_stop_request
from srt_services.supervise.runs import Emit, JobRun, RequestStop

#: Signals that stop the job (a second one while stopping: kill at once).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Signals:
    def __init__(
        self,
        run: JobRun,
        job: JobDir,
        cookie: str,
        emit: Emit,
        request_stop: RequestStop,
        kill_now: asyncio.Event,
    ) -> None:
        self.run = run
        self.job = job
        self.cookie = cookie
        self.emit = emit
        self.request_stop = request_stop
        self.kill_now = kill_now
        self.count = 0

    def install(self, loop: asyncio.AbstractEventLoop) -> dict[int, Any]:
        """Handle the signals on ``loop``; returns their dispositions before the job (given
        back by :meth:`remove`)."""
        before: dict[int, Any] = {
            int(sig): signal.getsignal(sig) for sig in (*STOP_SIGNALS, signal.SIGHUP)
        }

        def stop_signal(sig: int, frame: object) -> None:
            loop.call_soon_threadsafe(self.on_stop_signal, sig)

        for sig in STOP_SIGNALS:
            signal.signal(sig, stop_signal)
        if before[signal.SIGHUP] != signal.SIG_IGN:  # not under nohup
            loop.add_signal_handler(signal.SIGHUP, self.on_hangup)
        loop.add_signal_handler(signal.SIGUSR1, self.dump_tasks)
        quiet_wakeup()
        return before

    @staticmethod
    def remove(loop: asyncio.AbstractEventLoop, before: dict[int, Any], after: Any = None) -> None:
        """After ``job_finished``: the dispositions from before the job, or ``after`` for
        the stop signals (see :func:`absorb_late_stops`). Removing a handler costs ~60 µs in
        asyncio (it lists every valid signal), and a signal now finds the teardown done and
        changes nothing."""
        for handled in (signal.SIGHUP, signal.SIGUSR1):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(handled)
        for sig, was in before.items():
            keep = after if after is not None and sig in STOP_SIGNALS else was
            if keep is None:  # set from C, not Python: nothing to put back
                keep = signal.SIG_DFL
            if sig == signal.SIGHUP and was == signal.SIG_IGN:
                continue
            with contextlib.suppress(Exception):
                signal.signal(sig, keep)

    def on_stop_signal(self, sig: int) -> None:
        # act first, report second: reporting may fail (a closed terminal), acting may not
        self.count += 1
        name = signal.Signals(sig).name
        if self.count > 1 and self.run.stopping:
            self.kill_now.set()
            take_stop_request(self.job, self.cookie)  # never left behind
            self.emit("signal", signal=name, detail="second signal: killing everything now")
            return
        request = take_stop_request(self.job, self.cookie)
        cause = self.run.stop_cause
        if cause is not None:
            # the job's end was decided before this signal: it changes nothing
            self.emit(
                "signal",
                signal=name,
                by=request.who if request is not None else None,
                detail=f"the job was already ending ({cause.kind.value}): the stop changes nothing",
            )
            return
        if request is not None:
            self.request_stop(request.cause(name), self.user_stop_code(sig))
        else:
            self.request_stop(
                StopCause(StopKind.SIGNAL, f"received {name}", signal=name), 128 + sig
            )
        self.emit("signal", signal=name, by=request.who if request is not None else None)

    def user_stop_code(self, sig: int) -> int:
        """0 when stopping is how this job ends well: it was serving and has no benchmark or
        terminal service of its own to finish; otherwise 128+N, as for any signal (its work
        was cut short, and ``srt run ... && next`` must not go on). See the user guide."""
        finishes = any(
            u.instances and (u.planned.terminal or u.planned.category == "benchmark")
            for u in self.run.units.values()
        )
        return 0 if self.run.phase == "serving" and not finishes else 128 + sig

    def on_hangup(self) -> None:
        """SIGHUP: the terminal went away (an SSH session dropped, a closed window). The job
        goes on and ends as it would have with the terminal there; its output goes nowhere.
        ``srt stop``, SIGTERM or SIGINT end it."""
        self.emit("signal", signal="SIGHUP", detail="the terminal hung up; the job goes on")

    def dump_tasks(self) -> None:
        """SIGUSR1: write every pending coroutine's stack to ``debug-tasks.txt`` (hangs)."""
        out = io.StringIO()
        for task in asyncio.all_tasks():
            out.write(f"--- {task!r}\n")
            task.print_stack(file=out)
        with (
            contextlib.suppress(OSError),
            open(self.job.file("debug-tasks.txt"), "w", encoding="utf-8") as fh,
        ):
            fh.write(out.getvalue())


def quiet_wakeup() -> None:
    """Keep the loop's wake-up socket but stop the warning a full one prints (see the
    module docstring: a full socket means the loop is awake already)."""
    with contextlib.suppress(ValueError, OSError):
        fd = signal.set_wakeup_fd(-1)
        if fd != -1:
            signal.set_wakeup_fd(fd, warn_on_full_buffer=False)


def absorb_late_stops(job: JobDir, cookie: str) -> Any:
    """The stop signals' disposition from the job's end until ``srt run`` exits: ignored.
    The job has ended with its own code, which a late ``srt stop`` or Ctrl-C must not turn
    into 143. Ignored, not handled: the interpreter puts the default action (death) back
    for Python handlers while it shuts down, never for an ignored signal. A late stop's
    request is taken out of the job directory by the orchestrator's end or by ``srt stop``
    itself, which reads the result and says the job had ended before its stop arrived."""
    return signal.SIG_IGN
