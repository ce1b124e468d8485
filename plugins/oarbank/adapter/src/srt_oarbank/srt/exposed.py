"""The service side: any planned srt instance answering the seven protocol-1 operations.

``srt oarbank expose`` writes a bundle whose executable calls :func:`main` with the planned
instance (argv, env, preamble, files, readiness probe, stop grace, all rendered by srt's
planner). Every operation is idempotent: ``start`` on a running service reports the running
PID, ``stop`` on a stopped one succeeds, ``destroy`` of an unknown id succeeds. The one owned
object is the service's process, labelled with ``oarbank.attempt_id`` / ``oarbank.node`` /
``oarbank.service``; ``destroy`` without ``--force`` refuses it while it runs (busy).

State lives in ``$OARBANK_MODULE_DATA/srt-exposed/<service>/state.json`` (PID plus start
time, so a reused PID is never mistaken for the service). The ops that change what runs
(``start``, ``stop``, ``destroy``) hold an exclusive lock on ``lock`` next to it, so
concurrent calls (two agents, a retry racing a slow start) serialise: six concurrent
``start`` calls leave one server, the recorded one. Output is exactly one JSON document on
stdout; errors are ``{code, msg}`` documents with a non-zero exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from srt_services.extend import processes as process

#: Placeholder for the job directory in the planned instance; replaced by the module's
#: data directory at run time, because the bundle is built before any agent chose one.
DATA_SENTINEL = "/__srt_oarbank_data__"
OPS = ("fingerprint", "start", "stop", "status", "ready", "list_owned", "destroy")
#: The protocol's stop timeout is 120 s; keep the graceful part well inside it.
MAX_GRACE = 90.0


class OpError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg


def _data_dir() -> Path:
    value = os.environ.get("OARBANK_MODULE_DATA")
    if not value:
        raise OpError(4, "OARBANK_MODULE_DATA is not set")
    return Path(value)


def _swap(value: Any, data: str) -> Any:
    if isinstance(value, str):
        return value.replace(DATA_SENTINEL, data)
    if isinstance(value, list):
        return [_swap(v, data) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, data) for k, v in value.items()}
    return value


def _group_has_live_members(pgid: int) -> bool:
    """Whether a process other than a zombie is still in process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


class Exposed:
    def __init__(self, instance_file: Path) -> None:
        raw = json.loads(instance_file.read_text(encoding="utf-8"))
        self.data = _data_dir()
        self.job = self.data / "job"
        self.inst: dict[str, Any] = _swap(raw, str(self.job))
        self.service = os.environ.get("OARBANK_SERVICE") or self.inst["service"]
        self.node = os.environ.get("OARBANK_NODE_ID", "")
        self.dir = self.data / "srt-exposed" / self.service
        self.state_file = self.dir / "state.json"

    # ------------------------------------------------------------------ state

    def state(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.state_file.read_text(encoding="utf-8"))
            return data
        except (OSError, ValueError):
            return None

    def _write_state(self, state: dict[str, Any] | None) -> None:
        if state is None:
            self.state_file.unlink(missing_ok=True)
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        tmp.replace(self.state_file)

    def running_pid(self) -> int | None:
        st = self.state()
        if not st:
            return None
        pid = st.get("pid")
        if isinstance(pid, int) and process.same_process(pid, st.get("start_ticks")):
            return pid
        return None

    def _attempt_id(self) -> str:
        settings = os.environ.get("OARBANK_SETTINGS_FILE")
        if settings:
            try:
                value = json.loads(Path(settings).read_text(encoding="utf-8")).get("attempt_id")
                if isinstance(value, str) and value:
                    return value
            except (OSError, ValueError, AttributeError):
                pass
        return (
            os.environ.get("OARBANK_ATTEMPT_ID") or f"srt-{self.node or 'node'}-{int(time.time())}"
        )

    def labels(self, st: dict[str, Any]) -> dict[str, str]:
        return {
            "oarbank.attempt_id": st["attempt_id"],
            "oarbank.node": st.get("node", self.node),
            "oarbank.service": self.service,
        }

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive for the ops that change what runs; the kernel drops it if we die."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ ops

    def fingerprint(self) -> dict[str, Any]:
        argv = self.inst["argv"]
        binary = argv[0] if argv else ""
        found = bool(binary) and (shutil.which(binary) is not None or os.access(binary, os.X_OK))
        pid = self.running_pid()
        doc: dict[str, Any] = {
            "health": "healthy" if found else "undetected",
            "running": pid is not None,
            "attrs": {"srt_type": self.inst.get("type", "?"), "step": self.inst["step"]},
        }
        if not found:
            doc["detail"] = f"{binary} not found on PATH"
        if pid is not None:
            doc["pid"] = pid
        return doc

    def start(self) -> dict[str, Any]:
        with self.locked():
            return self._start()

    def _start(self) -> dict[str, Any]:
        pid = self.running_pid()
        if pid is not None:
            return {"changed": False, "pid": pid, "msg": "already running"}
        work = Path(self.inst["work_dir"])
        work.mkdir(parents=True, exist_ok=True)
        for name, content in self.inst.get("files", {}).items():
            target = (work / name).resolve()
            if not str(target).startswith(str(work.resolve()) + os.sep):
                raise OpError(7, f"file {name!r} would be outside the work dir")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        self.dir.mkdir(parents=True, exist_ok=True)
        log = self.dir / "service.log"
        attempt = self._attempt_id()
        env = process.service_env(
            self.inst["env"],
            {
                "OARBANK_ATTEMPT_ID": attempt,
                "OARBANK_SERVICE": self.service,
                "OARBANK_NODE_ID": self.node,
                "OARBANK_MODULE_DATA": str(self.data),
            },
        )
        argv = process.wrap_preamble(
            self.inst["argv"], self.inst.get("preamble"), f"srt:{self.inst['step']}"
        )
        cwd = self.inst.get("cwd")
        if cwd:
            Path(cwd).mkdir(parents=True, exist_ok=True)
        try:
            spawned = process.spawn(argv, env, str(log), cwd=cwd)
        except OSError as exc:
            raise OpError(5, f"cannot start {argv[0]}: {exc.strerror}") from None
        # the service outlives this op: Popen must not try to wait for it later
        spawned.popen.returncode = 0
        object_id = f"proc-{spawned.pid}-{spawned.start_ticks}"
        self._write_state(
            {
                "pid": spawned.pid,
                "start_ticks": spawned.start_ticks,
                "attempt_id": attempt,
                "node": self.node,
                "object_id": object_id,
                "log": str(log),
                "log_offset": spawned.log_offset,
                "started": time.time(),
            }
        )
        return {"changed": True, "pid": spawned.pid, "created": [object_id]}

    def _kill(self, pid: int, grace: float) -> bool:
        """Stop the service's process group; True when SIGKILL was needed.

        The group outlives its leader while any member lives, and Linux never hands a PID
        that is still some group's id to a new process, so after the leader exited a SIGKILL
        to the group can only reach the service's own leftovers (a helper that ignored TERM).
        """
        process.terminate_group(pid, self.inst.get("stop_signal", "TERM"))
        deadline = time.monotonic() + grace
        escalated = True
        while time.monotonic() < deadline:
            if not process.alive(pid):
                escalated = False
                break
            time.sleep(0.05)
        leftovers = _group_has_live_members(pid) and process.signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return escalated or leftovers

    def stop(self) -> dict[str, Any]:
        with self.locked():
            return self._stop()

    def _stop(self) -> dict[str, Any]:
        pid = self.running_pid()
        if pid is None:
            self._write_state(None)
            return {"changed": False, "msg": "not running"}
        escalated = self._kill(pid, min(float(self.inst.get("stop_grace", 30.0)), MAX_GRACE))
        self._write_state(None)
        return {"changed": True, "escalated": escalated}

    def _ready(self) -> tuple[bool, str]:
        probe = self.inst.get("readiness")
        if probe is None:
            return True, "running (no readiness probe)"
        from srt_services.extend.app import check_probe

        st = self.state() or {}
        result = asyncio.run(
            check_probe(
                probe["probe"],
                probe["config"],
                log_path=st.get("log", ""),
                log_offset=int(st.get("log_offset", 0)),
                job_dir=str(self.job),
                started_wall=float(st.get("started", 0.0)),
            )
        )
        return result.ok, result.detail or probe["describe"]

    def status(self) -> dict[str, Any]:
        running = self.running_pid() is not None
        if not running:
            return {"running": False, "ready": False, "detail": "not running"}
        ready, detail = self._ready()
        return {"running": True, "ready": ready, "detail": detail}

    def list_owned(self) -> dict[str, Any]:
        st = self.state()
        if not st:
            return {"objects": []}
        busy = self.running_pid() is not None
        return {
            "objects": [
                {
                    "id": st["object_id"],
                    "kind": "process",
                    "labels": self.labels(st),
                    "busy": busy,
                    "uid": os.getuid(),
                }
            ]
        }

    def destroy(self, object_id: str, force: bool) -> dict[str, Any]:
        with self.locked():
            return self._destroy(object_id, force)

    def _destroy(self, object_id: str, force: bool) -> dict[str, Any]:
        st = self.state()
        if not st or st.get("object_id") != object_id:
            return {"changed": False, "msg": "no such object"}
        pid = self.running_pid()
        if pid is not None and not force:
            raise OpError(12, f"{object_id} is busy (the service runs); stop it or use --force")
        escalated = self._kill(pid, 5.0) if pid is not None else False
        self._write_state(None)
        return {"changed": True, "escalated": escalated}


def main(instance_file: str, argv: list[str]) -> int:
    if not argv or argv[0] not in OPS:
        op = argv[0] if argv else ""
        json.dump(
            {"code": 2, "msg": f"unknown operation {op!r}; expected one of {', '.join(OPS)}"},
            sys.stdout,
        )
        sys.stdout.write("\n")
        return 2
    op = argv[0]
    try:
        exposed = Exposed(Path(instance_file))
        if op == "destroy":
            ids = [a for a in argv[1:] if a != "--force"]
            if len(ids) != 1:
                raise OpError(2, "usage: destroy <id> [--force]")
            doc = exposed.destroy(ids[0], "--force" in argv[1:])
        elif op == "ready":
            doc = exposed.status()
        else:
            doc = getattr(exposed, op)()
    except OpError as exc:
        json.dump({"code": exc.code, "msg": exc.msg}, sys.stdout)
        sys.stdout.write("\n")
        return 1
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    return 0
