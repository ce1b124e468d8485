"""Finding what a module under test started, without trusting what it says about it.

"Stop really stopped" and "a second start made no second instance" cannot rest on the
optional ``fingerprint.pid`` or on the module's own answers. The runner knows things the
module cannot fake: every op runs in a session of its own (so a child that did not call
``setsid`` keeps the op's session id), every executable gets ``OARBANK_MODULE_DATA`` set to
the runner's own (usually throw-away) data directory, which whatever it starts inherits,
and a service that keeps state there names that directory in its command line or works in
it. A process of our uid, started after the run began and matching any of these, is one the
module started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from oarbank_protocol.execution import process_identity


@dataclass(frozen=True)
class Found:
    pid: int
    ticks: int
    ppid: int
    sid: int
    cmdline: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.ticks)

    def describe(self) -> str:
        return f"pid {self.pid} ({self.cmdline[:120] or '?'})"


class ModuleProcesses:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = str(data_dir)
        self.since = time.time() - 1.0
        self.op_sessions: set[int] = set()
        self.uid = os.getuid()
        # The runner and whatever launched it (a shell whose command line names the data
        # directory) are not the module's.
        self.exclude = {os.getpid()}
        with contextlib.suppress(psutil.Error):
            self.exclude.update(p.pid for p in psutil.Process().parents())

    def op_ran(self, pid: int) -> None:
        """Remember an op's PID: ops run in a new session, so it is also the session id."""
        if pid:
            self.op_sessions.add(pid)

    def _ours(self, proc: psutil.Process, cmdline: str) -> bool:
        if self.data_dir in cmdline:
            return True
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) in self.op_sessions:
                return True
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get("OARBANK_MODULE_DATA") == self.data_dir:
                return True
        with contextlib.suppress(psutil.Error, OSError):
            cwd = proc.cwd()
            if cwd == self.data_dir or cwd.startswith(self.data_dir + os.sep):
                return True
        return False

    def snapshot(self) -> dict[tuple[int, int], Found]:
        """Every live process the module started (keyed by PID and kernel start time)."""
        out: dict[tuple[int, int], Found] = {}
        for proc in psutil.process_iter(["pid", "ppid", "uids", "create_time", "status"]):
            info = proc.info
            if info["pid"] in self.exclude or info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if (info["create_time"] or 0) < self.since:
                continue
            uids = info["uids"]
            if uids is None or uids.real != self.uid:
                continue
            try:
                cmdline = " ".join(proc.cmdline())
            except psutil.Error:
                continue
            if not self._ours(proc, cmdline):
                continue
            ticks = process_identity.start_ticks(info["pid"])
            if ticks is None:
                continue
            try:
                sid = os.getsid(info["pid"])
            except OSError:
                continue
            found = Found(info["pid"], ticks, info["ppid"] or 0, sid, cmdline)
            out[found.key] = found
        return out

    def settle(self, timeout_s: float = 3.0) -> dict[tuple[int, int], Found]:
        """A snapshot once it is empty, or the last one after ``timeout_s`` (exits take a
        moment to be reaped)."""
        deadline = time.monotonic() + timeout_s
        current = self.snapshot()
        while current and time.monotonic() < deadline:
            time.sleep(0.05)
            current = self.snapshot()
        return current

    def kill(self, found: dict[tuple[int, int], Found]) -> list[str]:
        """SIGKILL what a broken module left (only while each is still the process found)."""
        killed = []
        for item in found.values():
            if process_identity.signal_same(item.pid, item.ticks, signal.SIGKILL):
                killed.append(item.describe())
        return killed


def related(new: Found, old: dict[tuple[int, int], Found]) -> bool:
    """Whether a process that appeared later belongs to an instance already running (a helper
    it forked: same session, or a descendant of one of its processes)."""
    sessions = {item.sid for item in old.values()}
    if new.sid in sessions:
        return True
    pids = {item.pid for item in old.values()}
    ppid = new.ppid
    for _ in range(64):
        if ppid in pids:
            return True
        if ppid <= 1:
            return False
        try:
            ppid = psutil.Process(ppid).ppid()
        except psutil.Error:
            return False
    return False
