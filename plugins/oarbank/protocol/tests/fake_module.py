#!/usr/bin/env python3
"""A configurable fake service-protocol-1 executable (the CNI ``noop`` idea).

Behaviour comes from the JSON file named by ``FAKE_MODULE_CONFIG`` or, since the agent's
executor passes no foreign environment, from ``fake-module.json`` in the cwd (the bundle
root). The file is re-read on every call, so a test can change behaviour between calls.

Top-level knobs apply to every op; ``ops: {"<op>": {...}}`` overrides them per op:

* ``sleep_s``, ``exit_code``, ``act`` (perform the op; default: only when exit_code is 0),
  ``ignore_term``, ``fork_grandchild_holding_stdout``, ``daemonize``, ``grandchild_sleep_s``
* ``stdout``: normal | garbage | two_docs | trailing_text | invalid_utf8 | array | null |
  empty | huge (``stdout_bytes``) | literal (``stdout_literal``)
* ``stderr``: literal text, or ``"endless"``; ``error_doc``: printed when exit_code != 0
* ``extra_fields`` (unknown fields merged in), ``override_fields`` (e.g. wrong types)

Service knobs: ``health``, ``detail``, ``attrs``, ``pools``, ``reserve_mem_gb``,
``ready_after_s``, ``lie`` (start claims success without acting), ``service_exit_after_s``,
``service_exit_code``, ``service_ignore_term``, ``stop_grace_s``, ``naive_pid_check``,
``start_creates`` (objects start creates; ``kills_service`` objects take the service down
when destroyed, like a VM), ``generate_objects`` (synthetic list_owned entries),
``destroy_fails`` (ids, or true for all), ``health_sequence`` (cycled per fingerprint),
``start_sleep_after_spawn_s`` (start records the service, then lingers: a start op killed by
its timeout still leaves a recorded service), ``broken`` (deliberate spec violations, see
``BROKEN``). ``services: {"<name>": {...}}`` overrides any of these for one service.

``start_creates`` entries are ``{id, kind, busy, uid, kills_service, attempt_id, labels,
path}``: ``busy`` objects are busy while the service runs; with ``path`` the object is also a
real file outside the data directory, created by ``start`` and removed by ``destroy`` (an
owned object that no process tree holds, like a VM disk or a container).

``start`` really spawns a long-running, detached service process; owned objects live in
``<state_dir>/objects.json``; every invocation is appended to ``<state_dir>/calls.jsonl``.
Standard library only, so it starts fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

OPS = ("fingerprint", "start", "stop", "status", "ready", "list_owned", "destroy")
#: Deliberate violations a conformance test switches on with ``"broken": [...]``.
BROKEN = {
    "stop_not_idempotent": "stop of a stopped service fails",
    "missing_labels": "owned objects carry no labels",
    "fingerprint_writes": "fingerprint writes into the data directory",
    "unknown_op_succeeds": "an unknown operation exits 0",
    "ready_never": "ready never says ready",
    "stop_lies": "stop exits 0 and stops nothing",
    "second_instance": "start starts another service even when one runs",
    "destroy_lies": "destroy exits 0 and removes nothing",
    "ready_without_running": "status and ready say ready=true while nothing runs",
    "stop_leaves_child": "the service starts a helper in its own session that stop never stops",
    "busy_after_stop": "owned objects stay busy after the service stopped",
    "start_timeout_leak": "start daemonizes the service and records it late, so a start "
    "killed by its timeout leaves a service nobody can stop",
    "kind_missing": "owned objects have no kind",
    "bad_error_doc": "failures print {error: ...} instead of {code, msg}",
}
ENV_ALLOW = (
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "OARBANK_MODULE_DATA",
    "OARBANK_MODULE",
    "OARBANK_SERVICE",
    "OARBANK_NODE_ID",
    "OARBANK_PLATFORM",
    "OARBANK_SETTINGS_FILE",
    "OARBANK_TOOLS_FILE",
    "OARBANK_LIMITS_FILE",
)


# --------------------------------------------------------------------------- config & files


def load_config() -> dict[str, Any]:
    path = os.environ.get("FAKE_MODULE_CONFIG") or os.path.join(os.getcwd(), "fake-module.json")
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        return {}
    if not isinstance(value, dict):
        return {}
    # Per-service overrides: {"services": {"<OARBANK_SERVICE>": {...knobs, "ops": {...}}}}
    own = value.get("services", {}).get(os.environ.get("OARBANK_SERVICE", ""), {})
    merged = {**value, **{k: v for k, v in own.items() if k != "ops"}}
    merged["ops"] = {**value.get("ops", {}), **own.get("ops", {})}
    return merged


def state_dir(cfg: dict[str, Any]) -> str:
    base = cfg.get("state_dir")
    if not base:
        data = os.environ.get("OARBANK_MODULE_DATA") or os.getcwd()
        service = os.environ.get("OARBANK_SERVICE", "service")
        base = os.path.join(data, "fake-state", service)
    os.makedirs(base, exist_ok=True)
    return str(base)


def log_call(cfg: dict[str, Any], event: str, op: str, **extra: Any) -> None:
    path = cfg.get("call_log") or os.path.join(state_dir(cfg), "calls.jsonl")
    entry = {
        "event": event,
        "op": op,
        "argv": sys.argv[1:],
        "env": {k: os.environ[k] for k in ENV_ALLOW if k in os.environ},
        "env_keys": sorted(os.environ),
        "cwd": os.getcwd(),
        "time": time.time(),
        "mono": time.monotonic(),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "service": os.environ.get("OARBANK_SERVICE"),
        "settings": read_settings(),
        "tools": read_settings("OARBANK_TOOLS_FILE"),
        "limits": read_settings("OARBANK_LIMITS_FILE"),
        **extra,
    }
    line = (json.dumps(entry) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_settings(var: str = "OARBANK_SETTINGS_FILE") -> Any:
    """What the agent handed over in OARBANK_SETTINGS_FILE (echoed into the call log)."""
    path = os.environ.get(var)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        return {"__unreadable__": str(exc)}


def broken(cfg: dict[str, Any], what: str) -> bool:
    return what in cfg.get("broken", [])


def read_json(path: str, default: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def write_json(path: str, value: Any) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(sdir: str) -> Any:
    fd = os.open(os.path.join(sdir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def record_pid(sdir: str, name: str, pid: int) -> None:
    fd = os.open(os.path.join(sdir, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{pid}\n".encode())
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the service process


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat, or None for a dead process or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def service_pid(cfg: dict[str, Any], sdir: str) -> int | None:
    record = read_json(os.path.join(sdir, "service.json"), None)
    if not isinstance(record, dict):
        return None
    pid = int(record.get("pid", 0))
    if pid <= 0:
        return None
    if cfg.get("naive_pid_check"):
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        return pid
    started = proc_start_time(pid)
    if started is None or started != record.get("starttime"):
        return None
    return pid


def serve(sdir: str, cfg: dict[str, Any]) -> None:
    """Body of the long-running service that ``start`` spawns."""

    def on_signal(signum: int, _frame: Any) -> None:
        with open(os.path.join(sdir, "signals.log"), "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {signal.Signals(signum).name}\n")
        if signum == signal.SIGTERM and not cfg.get("service_ignore_term"):
            os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, on_signal)
    if broken(cfg, "stop_leaves_child"):
        import subprocess

        helper = subprocess.Popen(
            [sys.executable, "-S", "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        record_pid(sdir, "grandchildren.txt", helper.pid)
    began = time.monotonic()
    ready_after = float(cfg.get("ready_after_s", 0))
    exit_after = cfg.get("service_exit_after_s")
    ready_written = False
    while True:
        elapsed = time.monotonic() - began
        if not ready_written and elapsed >= ready_after:
            with open(os.path.join(sdir, "ready"), "w", encoding="utf-8") as handle:
                handle.write(str(os.getpid()))
            ready_written = True
        if exit_after is not None and elapsed >= float(exit_after):
            os._exit(int(cfg.get("service_exit_code", 1)))
        time.sleep(0.02)


# --------------------------------------------------------------------------- ops


def objects_path(sdir: str) -> str:
    return os.path.join(sdir, "objects.json")


def label_set(attempt: str, cfg: dict[str, Any]) -> dict[str, str]:
    node = os.environ.get("OARBANK_NODE_ID", "node")
    return {
        "oarbank.attempt_id": attempt,
        "oarbank.node": "another-node" if broken(cfg, "foreign_labels") else node,
        "oarbank.service": os.environ.get("OARBANK_SERVICE", "service"),
    }


def op_fingerprint(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    pid = service_pid(cfg, sdir)
    if "fingerprint_writes" in cfg.get("broken", []):
        with open(os.path.join(sdir, "fingerprint-count"), "a", encoding="utf-8") as handle:
            handle.write("x")
    health = cfg.get("health", "healthy")
    sequence = cfg.get("health_sequence")
    if sequence:
        counter = os.path.join(sdir, "health-counter")
        with locked(sdir):
            count = int(read_json(counter, 0))
            write_json(counter, count + 1)
        health = sequence[count % len(sequence)]
    doc: dict[str, Any] = {
        "health": health,
        "detail": cfg.get("detail", ""),
        "attrs": cfg.get("attrs", {"fake": True}),
        "pools": cfg.get("pools", {}),
        "reserve": {"mem_gb": cfg.get("reserve_mem_gb", 0)},
        "running": pid is not None,
    }
    if pid is not None:
        doc["pid"] = pid
    return doc


def spawn_service(cfg: dict[str, Any], sdir: str, *, daemonize: bool) -> int:
    """Start the long-running service; with ``daemonize`` it double-forks out of our tree."""
    import subprocess

    argv = [sys.executable, "-S", os.path.abspath(__file__), "__service__", sdir, json.dumps(cfg)]
    if daemonize:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.close(read_fd)
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
            os.write(write_fd, str(proc.pid).encode())
            os._exit(0)
        os.close(write_fd)
        service = int(os.read(read_fd, 32))
        os.close(read_fd)
        os.waitpid(pid, 0)
        record_pid(sdir, "service-pids.txt", service)
        return service
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    record_pid(sdir, "service-pids.txt", proc.pid)
    # Deliberately detached: the Popen object is dropped without wait, the child lives on.
    proc.returncode = 0
    return proc.pid


def op_start(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    if cfg.get("lie"):
        return {"changed": True, "msg": "started (not really)"}
    with locked(sdir):
        pid = service_pid(cfg, sdir)
        if pid is not None and not broken(cfg, "second_instance"):
            return {"changed": False, "pid": pid}
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(sdir, "ready"))
        late = broken(cfg, "start_timeout_leak")
        pid = spawn_service(cfg, sdir, daemonize=late)
        linger = float(cfg.get("start_sleep_after_spawn_s", 0))
        if late and linger:
            time.sleep(linger)  # killed here by a short timeout: nobody ever records it
        write_json(
            os.path.join(sdir, "service.json"), {"pid": pid, "starttime": proc_start_time(pid)}
        )
        created = []
        objects = read_json(objects_path(sdir), [])
        for spec in cfg.get("start_creates", []):
            obj = {
                "id": spec["id"],
                "kind": spec.get("kind", "container"),
                "labels": spec.get("labels") or label_set(spec.get("attempt_id", "a-1"), cfg),
            }
            for key in ("busy", "uid", "kills_service", "path"):
                if key in spec:
                    obj[key] = spec[key]
            if "path" in obj:
                with open(obj["path"], "w", encoding="utf-8") as handle:
                    json.dump(obj["labels"], handle)
            if not any(o["id"] == obj["id"] for o in objects):
                objects.append(obj)
            created.append(obj["id"])
        write_json(objects_path(sdir), objects)
        if linger and not late:
            time.sleep(linger)  # everything is recorded: a timeout here leaves nothing unknown
    return {"changed": True, "pid": pid, "created": created}


def op_stop(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    with locked(sdir):
        pid = service_pid(cfg, sdir)
        if pid is None:
            if "stop_not_idempotent" in cfg.get("broken", []):
                raise OpError(1, 7, "not running")
            return {"changed": False}
        if broken(cfg, "stop_lies"):
            return {"changed": True}
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + float(cfg.get("stop_grace_s", 2.0))
        escalated = False
        while proc_start_time(pid) is not None:
            if time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)
                escalated = True
                deadline = time.monotonic() + 5
            time.sleep(0.01)
        for name in ("service.json", "ready"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(sdir, name))
    return {"changed": True, "escalated": escalated}


def op_status(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    pid = service_pid(cfg, sdir)
    if pid is None and broken(cfg, "ready_without_running"):
        return {"running": False, "ready": True}
    ready = False
    if pid is not None and "ready_never" not in cfg.get("broken", []):
        marker = read_json(os.path.join(sdir, "ready"), None)
        ready = marker == pid
    return {"running": pid is not None, "ready": ready}


def op_list_owned(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    objects = list(read_json(objects_path(sdir), []))
    gen = cfg.get("generate_objects")
    if gen:
        node = gen.get("node") or os.environ.get("OARBANK_NODE_ID", "node")
        service = gen.get("service") or os.environ.get("OARBANK_SERVICE", "service")
        prefix = gen.get("attempt_prefix", "gen")
        attempts = int(gen.get("attempts", 10))
        for i in range(int(gen["count"])):
            objects.append(
                {
                    "id": f"g{i}",
                    "kind": "c",
                    "labels": {
                        "oarbank.attempt_id": f"{prefix}-{i % attempts}",
                        "oarbank.node": node,
                        "oarbank.service": service,
                    },
                }
            )
    if "missing_labels" in cfg.get("broken", []):
        for obj in objects:
            obj["labels"] = {}
    running = service_pid(cfg, sdir) is not None
    for obj in objects:
        for key in ("kills_service", "path"):
            obj.pop(key, None)
        if obj.get("busy"):
            obj["busy"] = running or broken(cfg, "busy_after_stop")
        if broken(cfg, "kind_missing"):
            obj.pop("kind", None)
    return {"objects": objects}


def op_destroy(cfg: dict[str, Any], sdir: str, args: list[str]) -> dict[str, Any]:
    if not args:
        raise OpError(2, 2, "destroy needs an id")
    target, force = args[0], "--force" in args[1:]
    fails = cfg.get("destroy_fails")
    if fails is True or (isinstance(fails, list) and target in fails):
        raise OpError(1, 5, f"cannot destroy {target}: backend unavailable")
    with locked(sdir):
        objects = read_json(objects_path(sdir), [])
        match = [o for o in objects if o["id"] == target]
        if not match:
            return {"changed": False}
        running = service_pid(cfg, sdir) is not None
        if match[0].get("busy") and (running or broken(cfg, "busy_after_stop")) and not force:
            raise OpError(1, 12, f"object {target} is busy; use --force")
        if broken(cfg, "destroy_lies"):
            return {"changed": True}
        if match[0].get("kills_service"):
            pid = service_pid(cfg, sdir)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        write_json(objects_path(sdir), [o for o in objects if o["id"] != target])
        if match[0].get("path"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(match[0]["path"])
    return {"changed": True}


class OpError(Exception):
    def __init__(self, exit_code: int, code: int, msg: str) -> None:
        super().__init__(msg)
        self.exit_code = exit_code
        self.code = code
        self.msg = msg


HANDLERS = {
    "fingerprint": op_fingerprint,
    "start": op_start,
    "stop": op_stop,
    "status": op_status,
    "ready": op_status,
    "list_owned": op_list_owned,
    "destroy": op_destroy,
}


# --------------------------------------------------------------------------- output shaping


#: What each ``stdout`` mode prints, from the document's JSON text and the knobs.
SHAPES: dict[str, Callable[[str, dict[str, Any]], bytes]] = {
    "normal": lambda text, _: text.encode() + b"\n",
    "garbage": lambda _, __: b"this is not json at all\n",
    "two_docs": lambda text, _: f"{text}\n{text}\n".encode(),
    "trailing_text": lambda text, _: f"{text} and then some\n".encode(),
    "invalid_utf8": lambda _, __: b'{"health": "\xff\xfe", "running": false}\n',
    "array": lambda text, _: f"[{text}]\n".encode(),
    "null": lambda _, __: b"null\n",
    "empty": lambda _, __: b"",
    "literal": lambda _, knobs: str(knobs.get("stdout_literal", "")).encode(),
}


def emit(mode: str, doc: dict[str, Any], knobs: dict[str, Any]) -> None:
    out = sys.stdout.buffer
    if mode == "huge":
        write_huge(out, int(knobs.get("stdout_bytes", 100 * 1024 * 1024)))
    elif mode in SHAPES:
        out.write(SHAPES[mode](json.dumps(doc), knobs))
    else:
        raise SystemExit(f"fake_module: unknown stdout mode {mode!r}")
    out.flush()


def write_huge(out: BinaryIO, size: int) -> None:
    """A JSON object padded to about ``size`` bytes, written in chunks (never held whole)."""
    remaining = size
    chunk = b"x" * 65536
    out.write(b'{"pad": "')
    while remaining > 0:
        out.write(chunk[: min(remaining, len(chunk))])
        remaining -= len(chunk)
    out.write(b'"}\n')


def spawn_holder(sdir: str, knobs: dict[str, Any], *, detach: bool) -> None:
    """Fork a grandchild that keeps our stdout open (and with ``detach``, escapes our group)."""
    sleep_for = float(knobs.get("grandchild_sleep_s", 60))
    pid = os.fork()
    if pid == 0:
        if detach:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        record_pid(sdir, "grandchildren.txt", os.getpid())
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(sleep_for)
        os._exit(0)
    if detach:
        os.waitpid(pid, 0)


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] == "__service__":
        serve(sys.argv[2], json.loads(sys.argv[3]))
        return 0
    cfg = load_config()
    op = sys.argv[1] if len(sys.argv) >= 2 else ""
    knobs = {k: v for k, v in cfg.items() if k != "ops"}
    knobs.update(cfg.get("ops", {}).get(op, {}))
    sdir = state_dir(cfg)
    log_call(cfg, "begin", op)
    misbehave(sdir, knobs)
    doc, exit_code = perform(cfg, knobs, sdir, op)
    doc = shape_document(cfg, knobs, doc, exit_code)
    default_mode = "normal" if doc or exit_code == 0 else "empty"
    emit(knobs.get("stdout", default_mode), doc, knobs)
    log_call(cfg, "end", op, exit_code=exit_code)
    return exit_code


def misbehave(sdir: str, knobs: dict[str, Any]) -> None:
    """What the knobs ask of every op before it acts: ignore SIGTERM, write to stderr (maybe
    without end), leave grandchildren, sleep."""
    if knobs.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stderr = knobs.get("stderr")
    if stderr == "endless":
        line = b"endless stderr noise " * 50 + b"\n"
        while True:
            sys.stderr.buffer.write(line)
    elif stderr:
        sys.stderr.write(str(stderr))
        sys.stderr.flush()
    if knobs.get("fork_grandchild_holding_stdout"):
        spawn_holder(sdir, knobs, detach=False)
    if knobs.get("daemonize"):
        spawn_holder(sdir, knobs, detach=True)
    if knobs.get("sleep_s"):
        time.sleep(float(knobs["sleep_s"]))


def perform(
    cfg: dict[str, Any], knobs: dict[str, Any], sdir: str, op: str
) -> tuple[dict[str, Any], int]:
    """Run the op (unless the knobs say not to): its document and exit code."""
    exit_code = int(knobs.get("exit_code", 0))
    if op not in HANDLERS:
        if "unknown_op_succeeds" in cfg.get("broken", []):
            return {"msg": "whatever"}, 0
        return {"code": 2, "msg": f"unknown operation {op!r}"}, 2
    if not knobs.get("act", exit_code == 0):
        return {}, exit_code
    try:
        return HANDLERS[op](cfg, sdir, sys.argv[2:]), exit_code
    except OpError as exc:
        return {"code": exc.code, "msg": exc.msg}, exc.exit_code


def shape_document(
    cfg: dict[str, Any], knobs: dict[str, Any], doc: dict[str, Any], exit_code: int
) -> dict[str, Any]:
    """The document as the knobs want it printed: an error document of their own, a broken
    one, or extra and overridden fields on success."""
    if exit_code != 0 and "error_doc" in knobs:
        doc = knobs["error_doc"]
    if exit_code != 0 and broken(cfg, "bad_error_doc") and doc:
        doc = {"error": doc.get("msg", "failed")}
    elif exit_code == 0:
        doc.update(knobs.get("extra_fields", {}))
        doc.update(knobs.get("override_fields", {}))
    return doc


if __name__ == "__main__":
    sys.exit(main())
