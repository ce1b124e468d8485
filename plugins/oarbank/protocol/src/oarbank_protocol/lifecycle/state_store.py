"""The manager's persisted state: what it started, so a restarted agent adopts, not duplicates.

Rules (fault matrix F22-F25):

* Writes are atomic (temp file, fsync, rename); a crash mid-write leaves the old file.
* A missing, empty, truncated, non-JSON or unknown-version file never crashes the agent: the
  file is moved aside as ``<file>.corrupt``, the load reports ``trusted=False``, and the
  manager falls back to the module's own truth (``fingerprint.running``) plus ``list_owned``.
* A different ``boot_id`` means every recorded PID belongs to a previous boot: PIDs and
  failure timestamps are dropped (never signalled), counters are kept.
* An exclusive ``flock`` on ``<file>.lock`` keeps two live agents off the same state; the
  kernel drops it when an agent dies, even by SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from oarbank_protocol.errors import StateLocked
from oarbank_protocol.execution.environment import write_json_atomic

log = logging.getLogger(__name__)

#: The name predates this library (it was srt-oarbank's); state files on disk carry it.
STATE_FORMAT: Final = "srt-oarbank-state"
STATE_VERSION: Final = 1
BOOT_ID_PATH: Final = Path("/proc/sys/kernel/random/boot_id")


def read_boot_id() -> str:
    try:
        return BOOT_ID_PATH.read_text(encoding="ascii").strip()
    except OSError:
        return "unknown"


@dataclass(frozen=True)
class LoadedState:
    """``status``: missing | ok | corrupt | other_boot. ``services`` is empty unless usable."""

    status: str
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    message: str = ""

    @property
    def trusted(self) -> bool:
        """The file was readable and written on this boot: PIDs in it may be checked."""
        return self.status == "ok"

    @property
    def needs_rediscovery(self) -> bool:
        """We lost track (corruption or reboot): ask ``list_owned`` what is out there."""
        return self.status in ("corrupt", "other_boot")


class StateStore:
    def __init__(self, path: Path, *, boot_id: str | None = None) -> None:
        self.path = path
        self.boot_id = boot_id or read_boot_id()
        self._lock_fd: int | None = None

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def lock(self) -> None:
        """Take the exclusive lock or raise :class:`StateLocked` at once (never wait)."""
        if self._lock_fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise StateLocked(
                f"state {self.path} is in use by another agent"
                + (f" (pid {holder})" if holder else "")
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def load(self) -> LoadedState:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LoadedState("missing")
        except OSError as exc:
            return self._discard(f"unreadable ({exc.strerror or exc})")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            what = "empty" if not raw.strip() else "not valid JSON (truncated?)"
            return self._discard(what)
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            return self._discard("not an srt-oarbank state file")
        if data.get("version") != STATE_VERSION:
            return self._discard(f"unknown version {data.get('version')!r}")
        services = data.get("services")
        if not isinstance(services, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) for k, v in services.items()
        ):
            return self._discard("malformed services section")
        if data.get("boot_id") != self.boot_id:
            stripped = {name: _forget_pids(record) for name, record in services.items()}
            return LoadedState(
                "other_boot", stripped, "written before a reboot: recorded PIDs are stale"
            )
        return LoadedState("ok", services)

    def save(self, services: dict[str, dict[str, Any]]) -> None:
        document = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "boot_id": self.boot_id,
            "pid": os.getpid(),
            "services": services,
        }
        try:
            write_json_atomic(self.path, document)
        except OSError as exc:
            # Losing one write only weakens adoption; crashing the agent would be worse.
            log.warning("cannot write state %s: %s", self.path, exc)

    def _discard(self, why: str) -> LoadedState:
        aside = self.path.with_name(self.path.name + ".corrupt")
        with contextlib.suppress(OSError):
            os.replace(self.path, aside)
        message = f"state file {self.path} {why}; moved to {aside.name}, rediscovering"
        log.warning("%s", message)
        return LoadedState("corrupt", {}, message)


def _forget_pids(record: dict[str, Any]) -> dict[str, Any]:
    kept = dict(record)
    for key in ("pid", "pid_start_ticks", "tracker", "users"):
        kept.pop(key, None)
    return kept
