"""Fault matrix F10-F12: log probes (stale content, rotation, split writes, huge lines) and
HTTP probes (503 then 200, redirects, slow answers, huge bodies)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services.probes.http import HttpProbe
from srt_services.probes.log import MAX_LINE, POLL_BYTES, LineScanner, LogProbe
from srt_services.supervise.probing import InotifyHub, Target, backoff_delay
from srt_services.testing.jobs import Jobs, events_of


def _target(
    config: dict[str, Any], log: str = "", offset: int = 0, hub: InotifyHub | None = None
) -> Target:
    return Target(
        config=config,
        log_path=log,
        log_offset=offset,
        job_dir="/tmp",
        started_wall=time.time(),
        interval=0.5,
        hub=hub,
        owner_check=lambda port: True,
    )


# ---------------------------------------------------------------------------- log scanner


def test_F10_stale_line_before_the_offset_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("old attempt: READY\n")
    scanner = LineScanner(str(log), log.stat().st_size, "READY")
    assert scanner.poll() is False
    with log.open("a") as fh:
        fh.write("new attempt starting\n")
    assert scanner.poll() is False
    with log.open("a") as fh:
        fh.write("READY now\n")
    assert scanner.poll() is True
    assert scanner.matched == b"READY now"


def test_F11_pattern_split_across_two_writes(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("")
    scanner = LineScanner(str(log), 0, r"Uvicorn running on .*:\d+")
    with log.open("a") as fh:
        fh.write("Uvicorn run")
    assert scanner.poll() is False
    with log.open("a") as fh:
        fh.write("ning on http://127.0.0.1:8000\n")
    assert scanner.poll() is True


def test_F11_truncation_resets_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("a" * 100 + "\n")
    scanner = LineScanner(str(log), 0, "READY")
    assert scanner.poll() is False
    log.write_text("READY\n")  # truncated and rewritten, shorter than the offset
    assert scanner.poll() is True


def test_F11_rotation_follows_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("x" * 1000 + "\n")
    scanner = LineScanner(str(log), 0, "READY")
    assert scanner.poll() is False
    os.rename(log, tmp_path / "x.out.1")
    log.write_text("READY\n")  # shorter than the old offset is not required: new inode
    assert scanner.poll() is True


def test_F11_huge_line_without_newline_keeps_memory_bounded(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    chunk = b"z" * (1 << 20)
    with log.open("wb") as fh:
        for _ in range(50):
            fh.write(chunk)
    scanner = LineScanner(str(log), 0, "READY")
    polls = 0
    while True:  # one poll reads a bounded amount, then gives the loop a turn
        assert scanner.poll() is False
        polls += 1
        assert len(scanner.pending) <= MAX_LINE
        if not scanner.behind:
            break
    assert polls == -(-50 * (1 << 20) // POLL_BYTES)
    with log.open("ab") as fh:
        fh.write(b"\nREADY\n")
    assert scanner.poll() is True


def test_F11_matched_exactly_once(tmp_path: Path) -> None:
    log = tmp_path / "x.out"
    log.write_text("")
    scanner = LineScanner(str(log), 0, "READY")
    with log.open("a") as fh:
        fh.write("READY partial")
    assert scanner.poll() is True
    assert scanner.matched == b"READY partial"


def test_log_probe_is_event_driven(tmp_path: Path) -> None:
    """The probe wakes on inotify, not on its 1 s fallback poll."""
    log = tmp_path / "x.out"
    log.write_text("")

    async def scenario() -> float:
        hub = InotifyHub(asyncio.get_running_loop())
        try:
            target = _target({"pattern": "READY", "path": None}, str(log), 0, hub)
            target.interval = 30.0
            waiter = asyncio.ensure_future(LogProbe().wait_ready(target, 1.0))
            await asyncio.sleep(0.2)
            t0 = time.monotonic()
            with log.open("a") as fh:
                fh.write("READY\n")
            await asyncio.wait_for(waiter, 5)
            return time.monotonic() - t0
        finally:
            hub.close()

    assert asyncio.run(scenario()) < 0.5


def test_a_line_written_between_the_first_read_and_the_watch_is_seen_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F10's flake: the ready line landed after the probe read the log but before inotify
    watched its directory, so no event came and the probe slept until its fallback poll
    (1 s), by which time the service had exited "before it was ready"."""
    log = tmp_path / "x.out"
    log.write_text("")
    real_poll = LineScanner.poll
    polls: list[bool | None] = []

    def poll_then_write(self: LineScanner) -> bool | None:
        found = real_poll(self)
        polls.append(found)
        if len(polls) == 1:
            with log.open("a") as fh:  # the service writes right after our read
                fh.write("READY\n")
        return found

    monkeypatch.setattr(LineScanner, "poll", poll_then_write)

    async def scenario() -> float:
        hub = InotifyHub(asyncio.get_running_loop())
        try:
            target = _target({"pattern": "READY", "path": None}, str(log), 0, hub)
            target.interval = 30.0
            t0 = time.monotonic()
            await asyncio.wait_for(LogProbe().wait_ready(target, 1.0), 5)
            return time.monotonic() - t0
        finally:
            hub.close()

    assert asyncio.run(scenario()) < 0.5
    assert polls[-1] is True


def test_a_watch_outlives_its_waiter_so_the_next_wait_has_no_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from srt_services.supervise import probing

    monkeypatch.setattr(probing, "WATCH_LINGER", 0.3)
    log = tmp_path / "x.out"
    log.write_text("")

    async def scenario() -> None:
        hub = InotifyHub(asyncio.get_running_loop())
        try:
            # the first wait only adds the watch and returns, so the caller reads again
            await asyncio.wait_for(hub.wait(str(log), 10), 0.2)
            assert str(tmp_path) in hub._dirs
            await hub.wait(str(log), 0.05)  # times out: nobody waits any more...
            assert str(tmp_path) in hub._dirs, "...but the watch is still there"
            waiter = asyncio.ensure_future(hub.wait(str(log), 10))
            await asyncio.sleep(0.02)
            with log.open("a") as fh:
                fh.write("x")
            await asyncio.wait_for(waiter, 0.5)
            await asyncio.sleep(0.6)
            assert str(tmp_path) not in hub._dirs, "an unused watch is dropped after the linger"
        finally:
            hub.close()

    asyncio.run(scenario())


def test_F10_rerun_in_the_same_job_dir_ignores_the_old_ready_line(jobs: Jobs) -> None:
    text = """
        schema: 2
        name: f10
        observability:
          metrics: false
        services:
          - name: svc
            command: [bash, -c, "sleep {delay}; echo READY; sleep 0.3"]
            readiness: {{log: {{pattern: READY}}}}
            terminal: true
        """
    first = jobs.run(text.format(delay=0))
    assert first.code == 0
    second = jobs.run(text.format(delay=1.0), job_dir=first.job_dir)
    assert second.code == 0
    ready = events_of(second, "ready", step="service_svc")[0]
    assert ready["waited"] >= 0.9, "the READY of the first run is not this attempt's"


def test_backoff_schedule() -> None:
    assert backoff_delay(0, 0.0, 2.0) == 0.005
    assert backoff_delay(3, 0.5, 2.0) == 0.04
    assert backoff_delay(10, 2.0, 2.0) == 0.08
    assert backoff_delay(10, 2.0, 0.02) == 0.02
    assert backoff_delay(99, 13.0, 2.0) == pytest.approx(1.08)
    assert backoff_delay(99, 1000.0, 2.0) == 2.0


# ---------------------------------------------------------------------------- http


class _Server:
    """A scripted HTTP server on loopback: each request gets the next canned behaviour."""

    def __init__(self, behaviours: list[str]) -> None:
        self.behaviours = behaviours
        self.hits = 0
        self.port = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        kind = self.behaviours[min(self.hits, len(self.behaviours) - 1)]
        self.hits += 1
        try:
            if kind == "503":
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            elif kind == "200":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif kind == "302":
                writer.write(
                    b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"
                )
            elif kind == "slow":
                await asyncio.sleep(3)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            elif kind == "huge":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n")
                for _ in range(100):
                    writer.write(b"x" * (1 << 20))
                    await writer.drain()
                    await asyncio.sleep(0.05)
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


async def _check(
    behaviours: list[str], status: int | None = None, timeout: float = 1.0
) -> list[bool]:
    server = _Server(behaviours)
    await server.start()
    probe = HttpProbe()
    cfg = {
        "host": "127.0.0.1",
        "port": server.port,
        "url": f"http://127.0.0.1:{server.port}/health",
        "status": status,
    }
    results = []
    try:
        for _ in behaviours:
            results.append((await probe.check(_target(cfg), timeout)).ok)
    finally:
        assert server.server is not None
        server.server.close()
    return results


def test_F12_503_then_200() -> None:
    assert asyncio.run(_check(["503", "200"])) == [False, True]


def test_F12_redirect_counts_as_ready_unless_a_status_is_required() -> None:
    assert asyncio.run(_check(["302"])) == [True]
    assert asyncio.run(_check(["302"], status=200)) == [False]


def test_F12_slow_answer_is_a_failure() -> None:
    t0 = time.monotonic()
    assert asyncio.run(_check(["slow"], timeout=0.5)) == [False]
    assert time.monotonic() - t0 < 2.5


def test_F12_huge_body_is_not_downloaded() -> None:
    t0 = time.monotonic()
    assert asyncio.run(_check(["huge"], timeout=2.0)) == [True]
    assert time.monotonic() - t0 < 2.0, "the probe read the status line, not 100 MB"
