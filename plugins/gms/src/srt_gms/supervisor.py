"""The GPU Memory Service supervisor of one engine worker: one server per GPU, one instance.

srt-gms writes this file into the instance's work directory and runs it with the job's
``python3`` (inside the job's container, where srt itself is not installed), so it uses the
standard library only and runs on any Python 3.8+. It:

1. makes the worker's GMS directory, removes stale sockets from it and creates the
   engines' failover lock file there;
2. starts ``python3 -m gpu_memory_service --device k`` (plus the recipe's ``args``) for
   every GPU ``k`` of the worker's device view, with ``GMS_SOCKET_DIR`` set to the
   directory;
3. waits until every server has created its sockets (``--sockets-per-device`` each:
   GMS serves its ``weights`` and ``kv_cache`` pools on one Unix socket each), at most
   ``--timeout`` seconds, then prints ``GMS ready: ...`` (what srt's log probe waits for);
4. supervises: a server that exits takes the others down and the instance with it (the
   service is critical: an engine without its memory service is lost);
5. on SIGTERM or SIGINT stops the servers (SIGTERM, SIGKILL after ``--grace``), removes
   the directory and exits 0.

Why a Python supervisor rather than the original's bash script: waiting for the first of
several children to exit, a startup deadline, signal forwarding and socket counting are a
few clear lines here and error-prone ones in bash, and this file can be tested directly.
The container needs ``python3`` anyway: the servers are Python modules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

#: The longest socket name GMS writes: ``gms_<GPU UUID>_kv_cache.sock``.
LONGEST_SOCKET_NAME = len("gms_GPU-00000000-0000-0000-0000-000000000000_kv_cache.sock")
#: sun_path holds 108 bytes, one of them the terminating NUL.
MAX_SOCKET_PATH = 107
LOCK_FILE = "failover.lock"
POLL = 0.05

_stop_signal: list[int] = []


def say(message: str) -> None:
    print(message, flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gms_supervisor")
    parser.add_argument("--dir", required=True, help="the worker's GMS directory")
    parser.add_argument("--devices", type=int, required=True, help="GPUs in the device view")
    parser.add_argument("--timeout", type=float, required=True, help="start-up budget, s")
    parser.add_argument("--sockets-per-device", type=int, default=2)
    parser.add_argument("--python", default="python3")
    parser.add_argument("--module", default="gpu_memory_service")
    parser.add_argument("--grace", type=float, default=10.0, help="SIGTERM to SIGKILL, s")
    parser.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: each server's")
    args = parser.parse_args(argv)
    if args.server_args[:1] == ["--"]:
        args.server_args = args.server_args[1:]
    return args


def sockets_in(directory: str) -> int:
    count = 0
    try:
        entries = os.listdir(directory)
    except OSError:
        return 0
    for name in entries:
        try:
            if stat.S_ISSOCK(os.lstat(os.path.join(directory, name)).st_mode):
                count += 1
        except OSError:
            pass
    return count


def prepare(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)  # a previous run's: a server could not bind over it
        except OSError:
            pass
    lock = os.path.join(directory, LOCK_FILE)
    os.close(os.open(lock, os.O_CREAT | os.O_WRONLY, 0o666))


def stop(servers: list[tuple[int, subprocess.Popen[bytes]]], grace: float) -> None:
    for _, proc in servers:
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for _, proc in servers:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def exited(servers: list[tuple[int, subprocess.Popen[bytes]]]) -> tuple[int, int, int] | None:
    """(device, pid, code) of the first server that has exited."""
    for device, proc in servers:
        code = proc.poll()
        if code is not None:
            return device, proc.pid, code
    return None


def finish(
    servers: list[tuple[int, subprocess.Popen[bytes]]], grace: float, directory: str, code: int
) -> int:
    stop(servers, grace)
    shutil.rmtree(directory, ignore_errors=True)
    return code


def socket_path_problem(directory: str) -> str | None:
    """Why GMS could not bind its sockets in ``directory`` (a path too long for a Unix
    socket), or ``None``: said before any server starts, in words that name the fix."""
    longest = len(os.path.join(directory, "x")) - 1 + LONGEST_SOCKET_NAME
    if longest <= MAX_SOCKET_PATH:
        return None
    return (
        f"GMS cannot start: its socket paths in {directory} would be {longest} characters"
        f" long, over the {MAX_SOCKET_PATH} a Unix socket allows; use a shorter node-local"
        " root (the site config's [storage] node_local)"
    )


def start(
    args: argparse.Namespace, directory: str, servers: list[tuple[int, subprocess.Popen[bytes]]]
) -> bool:
    """Start a server per device, each added to ``servers`` at once (so that a failure
    stops those already started); False when one could not start."""
    env = dict(os.environ, GMS_SOCKET_DIR=directory)
    for device in range(args.devices):
        argv_k = [args.python, "-m", args.module, "--device", str(device), *args.server_args]
        try:
            proc = subprocess.Popen(argv_k, env=env)
        except OSError as exc:
            say(f"GMS server for device {device} could not start: {exc}")
            return False
        servers.append((device, proc))
        say(f"GMS server device={device} pid={proc.pid}: {' '.join(argv_k)}")
    return True


def wait_ready(
    args: argparse.Namespace, directory: str, servers: list[tuple[int, subprocess.Popen[bytes]]]
) -> int | None:
    """Wait until every server has made its sockets, then say ``GMS ready``; ``None`` then,
    else the exit code (stop asked: 0; a server exited, or the budget ran out)."""
    want = args.devices * args.sockets_per_device
    started = time.monotonic()
    deadline = started + args.timeout
    while True:
        if _stop_signal:
            return 0
        gone = exited(servers)
        if gone is not None:
            device, pid, code = gone
            say(f"GMS server pid {pid} (device {device}) exited during startup (code={code})")
            return code or 1
        have = sockets_in(directory)
        if have >= want:
            break
        if time.monotonic() >= deadline:
            say(
                f"GMS startup timed out: {have} of {want} sockets in {directory} after"
                f" {args.timeout:g}s"
            )
            return 1
        time.sleep(POLL)
    say(
        f"GMS ready: {args.devices} device(s), {have} sockets in {directory}"
        f" ({time.monotonic() - started:.2f}s)"
    )
    return None


def supervise(servers: list[tuple[int, subprocess.Popen[bytes]]]) -> int:
    """Until a stop is asked (exit code 0) or a server exits (its code, at least 1)."""
    while not _stop_signal:
        gone = exited(servers)
        if gone is not None:
            device, pid, code = gone
            say(f"GMS server exited (code={code}, device {device}, pid {pid}); stopping the rest")
            return code or 1
        time.sleep(POLL)
    return 0


def main(argv: list[str]) -> int:
    args = parse(argv)
    directory = os.path.abspath(args.dir)
    problem = socket_path_problem(directory)
    if problem is not None:
        say(problem)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: _stop_signal.append(number))
    prepare(directory)
    servers: list[tuple[int, subprocess.Popen[bytes]]] = []
    if not start(args, directory, servers):
        return finish(servers, args.grace, directory, 1)
    code = wait_ready(args, directory, servers)
    if code is None:
        code = supervise(servers)
    return finish(servers, args.grace, directory, code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
