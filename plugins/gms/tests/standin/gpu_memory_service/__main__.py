"""``python3 -m gpu_memory_service --device K``: the stand-in server (see ``__init__``)."""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import socket
import sys
import tempfile
import time

TAGS = ("weights", "kv_cache")


def gpu_uuid(device: int) -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = int(visible.split(",")[device]) if visible else device
    return f"GPU-57a2d100-0000-4000-8000-{physical:012d}"


def main() -> int:
    parser = argparse.ArgumentParser(prog="gpu_memory_service")
    parser.add_argument("--device", type=int, required=True)
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    uuid = gpu_uuid(args.device)
    if os.environ.get("GMS_STANDIN_FAIL_DEVICE") == str(args.device):
        print(f"stand-in GMS device={args.device}: failing at start (as asked)", flush=True)
        return 3
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda n, _f: stop.append(n))
    directory = os.environ.get("GMS_SOCKET_DIR") or tempfile.gettempdir()
    sel = selectors.DefaultSelector()
    paths = []
    if os.environ.get("GMS_STANDIN_NO_SOCKETS") != "1":
        for tag in TAGS:
            path = os.path.join(directory, f"gms_{uuid}_{tag}.sock")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(path)
            sock.listen(16)
            sel.register(sock, selectors.EVENT_READ, tag)
            paths.append(path)
    print(f"stand-in GMS device={args.device} gpu={uuid} serving {paths}", flush=True)
    exit_after = os.environ.get("GMS_STANDIN_EXIT_AFTER")
    end = time.monotonic() + float(exit_after) if exit_after else None
    while not stop:
        if end is not None and time.monotonic() >= end:
            print(f"stand-in GMS device={args.device}: exiting 5 (as asked)", flush=True)
            return 5
        for key, _ in sel.select(timeout=0.1):
            conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
            conn.sendall(f"stand-in GMS {key.data} {uuid}\n".encode())
            conn.close()
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
