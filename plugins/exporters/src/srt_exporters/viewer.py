"""A Prometheus for ``srt metrics``: the job's own while it runs, else one on its record.

After the job ended, a throw-away Prometheus is started on a copy of the job's TSDB, with
no scrape config, on a free loopback port: the job's record is read, never written (a
Prometheus opening a database replays and may compact it, and takes its lock). The copy
hard-links the immutable block files and copies the rest (the write-ahead log, the head
chunks), so it is cheap even for a long job; it is removed when the command ends.

"When the command ends" includes every way it can be ended: SIGTERM, SIGHUP and SIGINT
become :class:`Interrupted` (raised once; a second signal during the clean-up does not cut
it short), so the temporary Prometheus is stopped (by the PID this command started, never
by name) and the copy removed before the command exits with 128 + the signal. Prometheus
is started with the signals blocked until the clean-up is in place, and with a parent-death
signal, so even a SIGKILL of the command does not leave it running.

A database is copied only when it holds what Prometheus writes (directories and regular
files: a FIFO would hang the copy, a link would have it read what it points to); one that
cannot be read, or that Prometheus refuses, is an error naming the file and Prometheus's
own words; one it repairs or partly skips (a damaged write-ahead log, a block without a
readable ``meta.json``) is shown with a warning saying so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

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
    #: what Prometheus found wrong with the job's database while opening it
    warnings: tuple[str, ...] = field(default=())


class NoMetrics(Exception):
    """The job has no metrics to show; the message says why."""


class Interrupted(BaseException):
    """A signal (SIGTERM, SIGHUP, SIGINT) asked the command to end: raised so that every
    clean-up on the way out runs. A ``BaseException``, so nothing catching errors stops it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


#: the signals that end ``srt metrics`` after its clean-up
ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_PR_SET_PDEATHSIG = 1


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """While inside: each of :data:`ENDING` raises :class:`Interrupted` (the first one;
    later ones are noted and dropped, so they do not interrupt the clean-up it started)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers belong to the main thread: an embedding caller handles signals
        return
    raised: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if raised:
            return
        raised.append(signum)
        raise Interrupted(signum)

    old = {sig: signal.signal(sig, on_signal) for sig in ENDING}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _child_setup() -> None:
    """In the temporary Prometheus, before exec: the signals blocked around its start are
    its own again, and it gets SIGTERM if this command dies without cleaning up."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


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
    if not os.path.lexists(tsdb):
        why = (
            "the job's Prometheus does not answer yet"
            if job.running and prometheus_units(job)
            else "observability.metrics was false, or no prometheus service ran"
        )
        raise NoMetrics(f"no metrics recorded in {job.path}: {tsdb} does not exist ({why})")
    if not os.path.isdir(tsdb):
        raise NoMetrics(f"{tsdb} is not a directory: not a Prometheus database")
    with replay(tsdb, binary) as replayed:
        yield Source(replayed.url, live=False, warnings=replayed.warnings)


@dataclass(frozen=True, slots=True)
class Replayed:
    url: str
    warnings: tuple[str, ...]


@contextlib.contextmanager
def replay(tsdb: str, binary: str = "prometheus") -> Iterator[Replayed]:
    """A read-only view of ``tsdb``: a Prometheus on a copy, its URL while the block runs.
    Whatever ends the block (an error, :class:`Interrupted`), the Prometheus is stopped and
    the copy removed."""
    exe = find_binary(binary)
    if exe is None:
        raise NoMetrics(
            f"{binary} not found: reading a finished job's metrics starts Prometheus on its"
            " database (Debian: apt-get install prometheus; or --prometheus PATH)"
        )
    check_database(tsdb)
    with interruptible(), tempfile.TemporaryDirectory(prefix="srt-metrics-") as scratch:
        data = os.path.join(scratch, "tsdb")
        _copy_tsdb(tsdb, data)
        config = os.path.join(scratch, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as fh:
            fh.write(EMPTY_CONFIG)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = os.path.join(scratch, "prometheus.log")
        proc: subprocess.Popen[bytes] | None = None
        # no signal between the start and the clean-up being in place (it would leave the
        # Prometheus running): blocked until then; the child unblocks them before exec
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)
        try:
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
                    preexec_fn=_child_setup,  # noqa: PLW1509 - no threads run here
                )
            signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)  # one that came raises now
            _wait_ready(url, proc, log_path, tsdb)
            yield Replayed(url, damage(log_path, tsdb))
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)  # the stop is not cut short
            try:
                if proc is not None:
                    _stop(proc)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The temporary Prometheus, stopped: SIGTERM to its PID, SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log_path: str, tsdb: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    with PromClient(url) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                copy = os.path.join(os.path.dirname(log_path), "tsdb")
                said = "; ".join(_log_lines(log_path, ("error",))) or _tail(log_path)
                said = said.replace(copy, tsdb)
                raise NoMetrics(
                    f"Prometheus cannot open the job's database {tsdb} (a copy of it; exit"
                    f" status {proc.returncode}): {said}"
                )
            if client.ready():
                return
            time.sleep(0.05)
    raise PromError(f"Prometheus on the job's database not ready in {READY_TIMEOUT:g}s")


_LOGFMT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def _log_lines(path: str, levels: tuple[str, ...]) -> list[str]:
    """Prometheus's log lines of these levels, each as ``msg (err)`` with the copy's path
    put back to the job's (the message names the file the user has)."""
    out: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return out
    for line in lines:
        fields = {k: v.strip('"').replace('\\"', '"') for k, v in _LOGFMT.findall(line)}
        if fields.get("level") not in levels or "SIGTERM" in fields.get("msg", ""):
            continue
        msg, err = fields.get("msg"), fields.get("err")
        text = f"{msg} ({err})" if msg and err else msg or err or line
        if "dir" in fields:
            text += f" in {os.path.basename(fields['dir'])}"
        out.append(text)
    return out


def damage(log_path: str, tsdb: str) -> tuple[str, ...]:
    """What Prometheus said was wrong with the database while it opened it (a repaired
    write-ahead log, a block skipped), each with the database named."""
    copy = os.path.join(os.path.dirname(log_path), "tsdb")
    return tuple(
        f"the job's database {tsdb} is damaged: {line.replace(copy, tsdb)}"
        for line in dict.fromkeys(_log_lines(log_path, ("warn", "error")))
    )


def _tail(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return " | ".join(fh.read().strip().splitlines()[-3:])


def check_database(tsdb: str) -> None:
    """:class:`NoMetrics` naming the first thing in ``tsdb`` a Prometheus database does not
    hold (a FIFO, a device, a socket, a symbolic link), or that cannot be read."""

    def fail(exc: OSError) -> None:
        raise exc

    try:
        for top, dirs, files in os.walk(tsdb, onerror=fail):
            for name in dirs + files:
                path = os.path.join(top, name)
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                    continue
                what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                if stat.S_ISFIFO(mode):
                    what = "a FIFO (named pipe)"
                raise NoMetrics(
                    f"{path} is {what}: a Prometheus database holds only directories and"
                    " regular files; the job's metrics are not read"
                )
    except OSError as exc:
        raise NoMetrics(_unreadable(exc, tsdb)) from None


def _unreadable(exc: OSError, tsdb: str) -> str:
    where = exc.filename or tsdb
    return f"the job's database cannot be read: {where}: {exc.strerror or exc}"


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

    try:
        shutil.copytree(
            src,
            dst,
            copy_function=link_or_copy,
            ignore=shutil.ignore_patterns("lock", "queries.active"),
        )
    except shutil.Error as exc:  # one per file that failed: the first names what is wrong
        source, _, why = exc.args[0][0]
        raise NoMetrics(f"the job's database cannot be read: {source}: {why}") from None
    except OSError as exc:
        raise NoMetrics(_unreadable(exc, src)) from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
