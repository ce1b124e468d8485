"""What the orchestrator does on a signal.

SIGTERM and SIGINT stop the job (a second one while stopping: kill at once); one sent by
``srt stop`` finds its stop request in the job directory and the job ends as stopped by
the user. SIGHUP is a terminal that went away: the job goes on. SIGUSR1 writes every
pending coroutine's stack to ``debug-tasks.txt``, for a job that seems to hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal

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

    def install(self, loop: asyncio.AbstractEventLoop) -> object:
        """Handle the signals on ``loop``; returns SIGHUP's disposition before the job
        (given back by :meth:`remove`)."""
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.on_stop_signal, sig)
        before = signal.getsignal(signal.SIGHUP)
        if before != signal.SIG_IGN:  # not under nohup
            loop.add_signal_handler(signal.SIGHUP, self.on_hangup)
        loop.add_signal_handler(signal.SIGUSR1, self.dump_tasks)
        return before

    @staticmethod
    def remove(loop: asyncio.AbstractEventLoop, sighup: object) -> None:
        """After ``job_finished``: removing a handler costs ~60 µs in asyncio (it lists
        every valid signal), and a signal now finds the teardown done and changes nothing."""
        for sig in (*STOP_SIGNALS, signal.SIGHUP, signal.SIGUSR1):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        if sighup is not None:  # a hang-up after the job must not kill srt either
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGHUP, sighup)  # type: ignore[arg-type]

    def on_stop_signal(self, sig: int) -> None:
        # act first, report second: reporting may fail (a closed terminal), acting may not
        self.count += 1
        name = signal.Signals(sig).name
        if self.count > 1 and self.run.stopping:
            self.kill_now.set()
            self.emit("signal", signal=name, detail="second signal: killing everything now")
            return
        request = take_stop_request(self.job, self.cookie)
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
