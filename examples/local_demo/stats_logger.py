"""The demo's after_frontend service: logs the registry's request counters as they change."""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from _common import request, say, setup_output

NAME = "stats-logger"


def main() -> None:
    setup_output()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", required=True, help="Registry base URL.")
    parser.add_argument("--every", type=float, default=0.2, help="Seconds between reads.")
    args = parser.parse_args()

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(NAME, f"following {args.registry}/stats")
    last: Any = None

    def read() -> None:
        nonlocal last
        try:
            status, stats = request("GET", f"{args.registry}/stats", timeout=2.0)
        except OSError:
            return
        if status == 200 and stats != last:
            say(NAME, " ".join(f"{k}={v:g}" for k, v in sorted(stats.items())) or "no traffic yet")
            last = stats

    try:
        while True:
            read()
            time.sleep(args.every)
    except SystemExit:
        read()  # the registry stops after us (an earlier tier stops first): one last look
        say(NAME, "stopping")


if __name__ == "__main__":
    main()
