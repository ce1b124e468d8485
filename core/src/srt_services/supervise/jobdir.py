"""The job directory: where a job leaves everything a later command needs.

    plan.json      the plan being executed (exactly what dry-run --json prints)
    recipe.yaml    the recipe as given
    events.jsonl   one JSON object per event, with monotonic and wall timestamps
    state.json     what runs where: PID, start time, state, per instance; the job's cookie
    result.json    how the job ended (written last)
    logs/          one file per step: service_<name>[...].out, <role>_<i>.out, ...
    work/<step>/   files a kind writes for an instance, and its scratch space
    src/<name>/    source checkouts

Writes are atomic (temporary file + rename) so that ``srt status`` never reads half a file,
and ``state.json`` is rewritten at most once per event-loop turn however many instances
changed in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srt_services.errors import SrtError

STATE_VERSION = 1


class JobDirError(SrtError):
    pass


def atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def new_cookie() -> str:
    return secrets.token_hex(16)


def default_job_dir(name: str, root: str | None = None) -> str:
    base = root or os.environ.get("SRT_JOB_ROOT") or os.path.join(os.getcwd(), "srt-jobs")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(base, f"{name}-{stamp}-{secrets.token_hex(2)}")


@dataclass(slots=True)
class JobDir:
    path: str

    @property
    def logs(self) -> str:
        return os.path.join(self.path, "logs")

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def inside(self, relative: str) -> str:
        """Absolute path of ``relative`` that is guaranteed to stay inside the job dir."""
        root = os.path.realpath(self.path)
        target = os.path.realpath(os.path.join(root, relative))
        if target != root and not target.startswith(root + os.sep):
            raise JobDirError(f"{relative!r} would be outside the job directory")
        return target

    def create(self) -> None:
        for sub in ("", "logs", "work", "src"):
            os.makedirs(os.path.join(self.path, sub), exist_ok=True)

    def read_json(self, name: str) -> Any:
        try:
            with open(self.file(name), "rb") as fh:
                return json.loads(fh.read())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise JobDirError(f"{self.file(name)} is unreadable: {exc}") from None


class EventLog:
    """``events.jsonl`` writer: one line per event.

    Lines are buffered and written once per event-loop turn (a burst of 200 launches is one
    write), and immediately when no loop runs; ``close`` writes what is left. Observers (the
    progress display) see each event at once and flush with the file.
    """

    def __init__(self, path: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._fh = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the job
        self._pending: list[bytes] = []
        self._scheduled = False
        self.on_event = on_event

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"t": round(time.time(), 6), "mono": round(time.monotonic(), 6), "event": event}
        record.update({k: v for k, v in fields.items() if v is not None})
        self._pending.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        if self.on_event is not None:
            try:
                self.on_event(record)
            except Exception:
                self.on_event = None
        if not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
            else:
                self._scheduled = True
                loop.call_soon(self.flush)
        return record

    def flush(self) -> None:
        self._scheduled = False
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._fh.write(data)
        flush = getattr(self.on_event, "flush", None)
        if flush is not None:
            try:
                flush()
            except Exception:
                self.on_event = None

    def close(self) -> None:
        self.flush()
        self._fh.close()


def orchestrator_identity() -> dict[str, Any]:
    from srt_services.launch.process import start_ticks

    pid = os.getpid()
    return {"pid": pid, "start_ticks": start_ticks(pid), "host": socket.gethostname()}


def read_events(path: str) -> list[dict[str, Any]]:
    out = []
    try:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line cut by a crash
    except FileNotFoundError:
        pass
    return out


def is_job_dir(path: str) -> bool:
    return Path(path, "state.json").exists() or Path(path, "plan.json").exists()
