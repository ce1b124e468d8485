"""A job process that uses etcd the way Dynamo does: through ``ETCD_ENDPOINTS`` only.

Standard library only (etcd's HTTP/JSON gateway, base64 keys and values), so it runs under
any Python. Modes:

``worker KEY VALUE``  put KEY, read it back, print ``etcd worker ready``, then stay up
                      (a worker that exits would end the job: workers are critical).
``check KEY VALUE``   read KEY and exit 0 only if it holds VALUE (a benchmark step).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import urllib.request
from typing import Any


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def endpoint() -> str:
    # ETCD_ENDPOINTS may list several members; any one of them serves the whole keyspace.
    return os.environ["ETCD_ENDPOINTS"].split(",")[0].rstrip("/")


def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{endpoint()}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        data: dict[str, Any] = json.load(response)
        return data


def put(key: str, value: str) -> None:
    call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})


def get(key: str) -> str | None:
    kvs = call("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _stay_up() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def main(argv: list[str]) -> int:
    mode = argv[0]
    key, value = argv[1], argv[2]
    if mode == "worker":
        put(key, value)
        got = get(key)
        if got != value:
            print(f"read back {got!r}, wrote {value!r}", flush=True)
            return 1
        print(f"etcd worker ready: {key}={got} via {endpoint()}", flush=True)
        _stay_up()
    if mode == "check":
        got = get(key)
        print(f"check {key}: {got!r} via {endpoint()}", flush=True)
        return 0 if got == value else 1
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
