"""What both agent processes (node and service) share: how they log and how they obey
SIGTERM and SIGINT.

The first signal asks for an orderly stop: the returned event is set and the agent stops its
services as its stop policy says. A second one exits at once: an operator who signals twice
wants the agent gone now, and its services are left running for the next agent to adopt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

log = logging.getLogger("oarbank_protocol.agent")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def setup_logging(level: str) -> None:
    """Log to stderr (srt keeps it in the service's log) at ``--log-level``, time-stamped."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


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
