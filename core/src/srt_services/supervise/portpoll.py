"""One timer for every waiting tcp/http probe.

A readiness probe waiting for a port to open is the commonest wait of a job start, and
there may be hundreds at once. Instead of one coroutine sleeping and waking per probe
(a task switch, a timer and a future per attempt), the poller keeps one heap of due
attempts and one timer on the event loop; at each tick it tries every due port with a
non-blocking ``connect_ex``, which on loopback answers at once (refused, or connected), and
only wakes a probe whose port opened. A connect that stays in progress (a remote node) is
finished with a writer callback on that socket, bounded by the attempt timeout.
"""

from __future__ import annotations

import asyncio
import errno
import heapq
import itertools
import socket
import time
from dataclasses import dataclass

from srt_services.supervise.backoff import backoff_delay

#: Attempts due within this much of the earliest one run in the same tick.
COALESCE = 0.002


@dataclass(eq=False)
class _Wait:
    host: str
    port: int
    interval: float
    started: float
    attempt_timeout: float
    future: asyncio.Future[None]
    attempts: int = 0
    last_error: str = ""
    sock: socket.socket | None = None
    guard: asyncio.TimerHandle | None = None


class PortPoller:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, _Wait]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    def wait_open(
        self,
        host: str,
        port: int,
        interval: float,
        started: float | None = None,
        attempt_timeout: float = 1.0,
    ) -> _Wait:
        """Start waiting; ``await w.future`` returns once a connect succeeded."""
        w = _Wait(
            host,
            port,
            interval,
            started if started is not None else time.monotonic(),
            attempt_timeout,
            self.loop.create_future(),
        )
        self._push(w, self.loop.time())
        return w

    def _push(self, w: _Wait, when: float) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), w))
        if when < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = when
            self._timer = self.loop.call_at(when, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        now = self.loop.time()
        heap = self._heap
        while heap and heap[0][0] <= now + COALESCE:
            _, _, w = heapq.heappop(heap)
            if not w.future.done():
                self._try(w)
        if heap:
            when = heap[0][0]
            self._timer_at = when
            self._timer = self.loop.call_at(when, self._tick)

    def _again(self, w: _Wait, error: str) -> None:
        w.last_error = error
        w.attempts += 1
        delay = backoff_delay(w.attempts - 1, time.monotonic() - w.started, w.interval)
        self._push(w, self.loop.time() + delay)

    def _try(self, w: _Wait) -> None:
        family = socket.AF_INET6 if ":" in w.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            err = sock.connect_ex((w.host, w.port))
        except OSError as exc:
            sock.close()
            self._again(w, errno.errorcode.get(exc.errno or 0, str(exc)))
            return
        if err == 0:
            sock.close()
            w.future.set_result(None)
            return
        if err == errno.EINPROGRESS:
            # On loopback the kernel has usually settled a refused connect before connect()
            # returns: reading SO_ERROR now saves the writer registration, its timer and an
            # event-loop wake-up on every failed attempt (most attempts fail).
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) or errno.EINPROGRESS
        if err != errno.EINPROGRESS:
            sock.close()
            self._again(w, errno.errorcode.get(err, str(err)))
            return
        w.sock = sock
        self.loop.add_writer(sock.fileno(), self._writable, w)
        w.guard = self.loop.call_later(w.attempt_timeout, self._timed_out, w)

    def _finish_pending(self, w: _Wait) -> int | None:
        sock = w.sock
        if sock is None:
            return None
        self.loop.remove_writer(sock.fileno())
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        sock.close()
        w.sock = None
        if w.guard is not None:
            w.guard.cancel()
            w.guard = None
        return err

    def _writable(self, w: _Wait) -> None:
        err = self._finish_pending(w)
        if w.future.done():
            return
        if err == 0:
            w.future.set_result(None)
        else:
            self._again(w, errno.errorcode.get(err or 0, str(err)))

    def _timed_out(self, w: _Wait) -> None:
        w.guard = None
        self._finish_pending(w)
        if not w.future.done():
            self._again(w, f"connect to {w.host}:{w.port} timed out after {w.attempt_timeout:g}s")

    def cancel(self, w: _Wait) -> None:
        self._finish_pending(w)
        if not w.future.done():
            w.future.cancel()
