"""How both agents (node and service) obey SIGTERM and SIGINT.

The first signal asks for an orderly stop: the returned event is set and the agent stops its
services as its stop policy says. A second one exits at once: an operator who signals twice
wants the agent gone now, and its services are left running for the next agent to adopt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

log = logging.getLogger("srt_oarbank.agent")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(loop: asyncio.AbstractEventLoop, left: str) -> tuple[asyncio.Event, list[int]]:
    """Install the handlers; returns the stop event and the signals seen so far (in order).
    ``left`` says in the log what a second signal leaves behind."""
    stop = asyncio.Event()
    seen: list[int] = []

    def on_signal(signum: int) -> None:
        seen.append(signum)
        if len(seen) == 1:
            log.info("received %s: stopping", signal.Signals(signum).name)
            stop.set()
        else:
            log.warning("second signal: exiting now; %s", left)
            os._exit(128 + signum)

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    return stop, seen
