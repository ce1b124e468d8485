"""A stand-in engine worker and benchmark that use a real Mooncake pool (stdlib only).

``roundtrip PUT_STORE GET_STORE KEY VALUE METRICS_PORT``: put KEY through one store's REST
API, read it back through another (the value lives in whichever store's segment the master
chose, so the read may cross the network), check that the master counts the key, print what
the Mooncake environment says, then print the readiness line and serve until stopped.

``check STORES KEYS METRICS_PORT COUNT``: every key readable through every store, and the
master's ``master_key_count`` equals COUNT; exit 1 (with the reason) otherwise.

The master's address comes from ``MOONCAKE_MASTER``, as a real worker's connector reads it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

ENV = (
    "MOONCAKE_MASTER",
    "MOONCAKE_TE_META_DATA_SERVER",
    "MOONCAKE_PROTOCOL",
    "MOONCAKE_LOCAL_HOSTNAME",
    "MOONCAKE_GLOBAL_SEGMENT_SIZE",
    "MOONCAKE_CONFIG_PATH",
)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def put(store: str, key: str, value: str) -> None:
    body = json.dumps({"key": key, "value": value}).encode()
    req = urllib.request.Request(
        f"{store}/api/put", data=body, method="PUT", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.load(r)
    if answer.get("status") != "success":
        sys.exit(f"put {key} through {store}: {answer}")


def key_count(metrics_port: str) -> int:
    host = os.environ["MOONCAKE_MASTER"].rsplit(":", 1)[0]
    _, text = _get(f"http://{host}:{metrics_port}/metrics")
    for line in text.decode().splitlines():
        if line.startswith("master_key_count "):
            return int(float(line.split()[1]))
    sys.exit(f"the master at {host}:{metrics_port} reports no master_key_count")


def roundtrip(put_store: str, get_store: str, key: str, value: str, metrics_port: str) -> None:
    for name in ENV:
        print(f"env {name}={os.environ.get(name, '<unset>')}", flush=True)
    put(put_store, key, value)
    status, got = _get(f"{get_store}/api/get/{key}")
    if status != 200 or got.decode() != value:
        sys.exit(f"get {key} through {get_store}: {status} {got!r}")
    count = key_count(metrics_port)
    if count < 1:
        sys.exit(f"the master counts {count} keys after the put")
    print(f"put {key} via {put_store}, got {got.decode()!r} via {get_store}", flush=True)
    print(f"master counts {count} key(s)", flush=True)
    print("mooncake worker ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def check(stores: str, keys: str, metrics_port: str, count: str) -> None:
    for name in ENV[:3]:
        print(f"env {name}={os.environ.get(name, '<unset>')}", flush=True)
    for store in stores.split(","):
        for key in keys.split(","):
            status, got = _get(f"{store}/api/get/{key}")
            if status != 200:
                sys.exit(f"get {key} through {store}: {status} {got!r}")
            print(f"check {key} via {store}: {got.decode()!r}", flush=True)
    counted = key_count(metrics_port)
    if counted != int(count):
        sys.exit(f"the master counts {counted} keys, expected {count}")
    print(f"master counts {counted} key(s)", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "roundtrip":
        roundtrip(*sys.argv[2:7])
    elif sys.argv[1] == "check":
        check(*sys.argv[2:6])
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}")
