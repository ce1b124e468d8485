"""The orchestrator's signal handling with its loop busy while 1,500 SIGCHLD and then one
SIGTERM arrive: ``python sigflood.py JOBDIR`` prints ``stopped [...]`` when the stop was
seen, ``LOST []`` when it was not (what asyncio's own dispatch did once its wake-up socket
was full). The real ``ChildWatcher`` and ``Signals``; the job run is a stand-in holding
what they read."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from typing import Any

from srt_services.jobdir.cause import StopCause
from srt_services.jobdir.layout import JobDir
from srt_services.launch.children import ChildWatcher
from srt_services.supervise.signals import Signals


class Run:
    stopping = False
    stop_cause: StopCause | None = None
    phase = "serving"
    units: dict[str, Any] = {}


GOT: list[tuple[str, int]] = []


def request_stop(cause: StopCause, code: int) -> None:
    GOT.append((cause.kind.value, code))
    Run.stopping = True


def flood(pid: int) -> None:
    for _ in range(1500):
        os.kill(pid, signal.SIGCHLD)
        time.sleep(0.0002)  # apart: pending signals of one kind coalesce
    os.kill(pid, signal.SIGTERM)


async def main(job_dir: str) -> None:
    loop = asyncio.get_running_loop()
    watcher = ChildWatcher(loop)
    signals = Signals(
        Run(),  # type: ignore[arg-type]
        JobDir(job_dir),
        "c" * 32,
        lambda *a, **k: None,
        request_stop,
        asyncio.Event(),
    )
    signals.install(loop)
    sender = threading.Thread(target=flood, args=(os.getpid(),))
    sender.start()
    time.sleep(2.0)  # the loop is busy: its wake-up socket fills up meanwhile
    sender.join()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if GOT:
            break
    watcher.close()
    print("stopped" if GOT else "LOST", GOT)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
