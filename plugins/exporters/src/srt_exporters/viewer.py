"""A Prometheus for ``srt metrics``: the job's own while it runs, else one on its record.

After the job ended, a throw-away Prometheus is started on a copy of the job's TSDB, with
no scrape config, on a free loopback port: the job's record is read, never written (a
Prometheus opening a database replays and may compact it, and takes its lock). The copy
hard-links the immutable block files and copies the rest (the write-ahead log, the head
chunks), so it is cheap even for a long job; it is removed when the command ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from srt_services.extend import JobRecord, PlannedUnit

from srt_exporters.common import find_binary
from srt_exporters.promapi import PromClient, PromError
from srt_exporters.prometheus import DEFAULT_PORT, KIND

READY_TIMEOUT = 60.0
EMPTY_CONFIG = "global:\n  evaluation_interval: 1h\nscrape_configs: []\n"


@dataclass(frozen=True, slots=True)
class Source:
    """Where the samples come from: the job's running Prometheus, or its record."""

    url: str
    live: bool


class NoMetrics(Exception):
    """The job has no metrics to show; the message says why."""


def prometheus_units(job: JobRecord) -> list[PlannedUnit]:
    """The plan's ``prometheus`` units (normally one)."""
    if job.plan is None:
        return []
    return [u for u in job.plan.units if u.type == KIND and u.instances]


def live_url(job: JobRecord) -> str | None:
    """The job's own Prometheus, if the job runs and it answers."""
    if not job.running:
        return None
    for unit in prometheus_units(job):
        inst = unit.instances[0]
        port = unit.options.get("port") or (inst.ports or [DEFAULT_PORT])[0]
        ip = inst.node_ip
        host = f"[{ip}]" if ":" in ip else ip
        url = f"http://{host}:{port}"
        with PromClient(url) as client:
            if client.ready():
                return url
    return None


@contextlib.contextmanager
def open_source(job: JobRecord, binary: str = "prometheus") -> Iterator[Source]:
    url = live_url(job)
    if url is not None:
        yield Source(url, live=True)
        return
    tsdb = job.paths.tsdb_dir
    if not os.path.isdir(tsdb):
        why = (
            "the job's Prometheus does not answer yet"
            if job.running and prometheus_units(job)
            else "observability.metrics was false, or no prometheus service ran"
        )
        raise NoMetrics(f"no metrics recorded in {job.path}: {tsdb} does not exist ({why})")
    with replay(tsdb, binary) as replayed:
        yield Source(replayed, live=False)


@contextlib.contextmanager
def replay(tsdb: str, binary: str = "prometheus") -> Iterator[str]:
    """A read-only view of ``tsdb``: a Prometheus on a copy, its URL while the block runs."""
    exe = find_binary(binary)
    if exe is None:
        raise NoMetrics(
            f"{binary} not found: reading a finished job's metrics starts Prometheus on its"
            " database (Debian: apt-get install prometheus; or --prometheus PATH)"
        )
    with tempfile.TemporaryDirectory(prefix="srt-metrics-") as scratch:
        data = os.path.join(scratch, "tsdb")
        _copy_tsdb(tsdb, data)
        config = os.path.join(scratch, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as fh:
            fh.write(EMPTY_CONFIG)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = os.path.join(scratch, "prometheus.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    exe,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    "--storage.tsdb.retention.time=100y",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_ready(url, proc, log_path)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log_path: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    with PromClient(url) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise PromError(f"Prometheus exited ({proc.returncode}): {_tail(log_path)}")
            if client.ready():
                return
            time.sleep(0.05)
    raise PromError(f"Prometheus on the job's database not ready in {READY_TIMEOUT:g}s")


def _tail(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return " | ".join(fh.read().strip().splitlines()[-3:])


def _copy_tsdb(src: str, dst: str) -> None:
    """Blocks (directories with a ``meta.json``) are immutable: hard-link their files when
    the file system allows; everything else (WAL, head chunks) is copied."""

    def link_or_copy(s: str, d: str) -> object:
        top = os.path.relpath(s, src).split(os.sep)[0]
        if os.path.exists(os.path.join(src, top, "meta.json")):
            with contextlib.suppress(OSError):
                os.link(s, d)
                return d
        return shutil.copy2(s, d)

    shutil.copytree(
        src,
        dst,
        copy_function=link_or_copy,
        ignore=shutil.ignore_patterns("lock", "queries.active"),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
