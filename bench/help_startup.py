"""Cold start of `srt --help` against the `--help` of a minimal rich-click app.

Both run in fresh interpreters of the same Python (the one running this script, started
with ``-I`` so no user site or PYTHON* variable adds start-up work), alternating, N times
each; the medians and their ratio are printed (target: srt <= 1.15x the minimal app).
`python -I -c pass` is measured too, as the interpreter's own floor.

    .venv/bin/python bench/help_startup.py [--runs 30]

Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MINIMAL_APP = '''\
import rich_click as click


@click.group()
def cli() -> None:
    """A minimal rich-click application."""


@cli.command()
def hello() -> None:
    """Say hello."""
    click.echo("hello")


if __name__ == "__main__":
    cli()
'''


def _run(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
    )
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {out.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each command")
    args = parser.parse_args()

    # The environment a user has: installed plugins are discoverable (srt must still not
    # import them for --help); nothing that changes the interpreter's start-up.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SRT_"))}
    env["COLUMNS"] = "100"
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="srt-bench-") as tmp:
        app = Path(tmp) / "minimal_app.py"
        app.write_text(MINIMAL_APP)
        commands = {
            "srt --help": [python, "-I", "-m", "srt_services", "--help"],
            "minimal rich-click --help": [python, "-I", str(app), "--help"],
            "python -I -c pass": [python, "-I", "-c", "pass"],
        }
        for argv in commands.values():  # warm the page cache and the .pyc files
            _run(argv, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():  # alternate, so drift hits all alike
                times[name].append(_run(argv, env))

    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.runs} runs each, {python}")
    for name, value in med.items():
        spread = statistics.quantiles(times[name], n=10) if len(times[name]) >= 10 else None
        extra = f"  (p10 {spread[0] * 1e3:.0f} ms, p90 {spread[-1] * 1e3:.0f} ms)" if spread else ""
        print(f"  {name:28s} median {value * 1e3:7.1f} ms{extra}")
    ratio = med["srt --help"] / med["minimal rich-click --help"]
    floor = med["python -I -c pass"]
    above = (med["srt --help"] - floor) / max(med["minimal rich-click --help"] - floor, 1e-9)
    print(f"srt --help / minimal rich-click --help = {ratio:.3f}x   (target <= 1.15x)")
    print(f"  above the bare interpreter: {above:.3f}x")


if __name__ == "__main__":
    main()
