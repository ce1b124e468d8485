"""A stand-in engine worker for srt-gms's tests: it does with GMS what an engine started for
shadow engine recovery does first, from what srt told it (``GMS_SOCKET_DIR``,
``FAILOVER_LOCK_PATH``): connect to every server socket of its GPUs and take the failover
lock. Prints ``gms worker ready: ...`` and serves until SIGTERM."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys


def main() -> int:
    directory = os.environ["GMS_SOCKET_DIR"]
    lock_path = os.environ["FAILOVER_LOCK_PATH"]
    answers = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".sock"):
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(os.path.join(directory, name))
            answers.append(sock.recv(256).decode().strip())
    fd = os.open(lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the active engine's lock
    os.write(fd, b"engine-0")
    gpus = sorted({a.rsplit("-", 1)[-1].lstrip("0") or "0" for a in answers})
    print(
        f"gms worker ready: {len(answers)} sockets in {directory}, gpus {','.join(gpus)},"
        f" lock {lock_path}",
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
