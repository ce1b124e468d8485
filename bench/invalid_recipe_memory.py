"""Peak memory of `srt validate` on an invalid recipe against a valid one of the same size.

Issue 18 (parse bounds): refusing a recipe must not cost more than loading one. Each
shape is written twice, with the same number of values: once right (the raw baseline,
measured in the same run) and once wrong in every value. Each file is validated by
`srt validate` in a fresh interpreter; its peak RSS is read from ``wait4``'s rusage.

* ``items``: one service whose ``args`` hold N values (``true`` where text is expected);
* ``entries``: N/7 services on the head node, each with a wrong-typed ``critical``;
* ``rules``: valid in shape, N unknown placeholders (refused by the rules, not the models).

    .venv/bin/python bench/invalid_recipe_memory.py [--values 1000000] [--keep]

Prints numbers and ratios; asserts nothing. Target: invalid / valid <= 1.5.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD = "schema: 2\nname: m\nobservability: {metrics: false}\nservices:\n"
ONE = HEAD + "  - name: a\n    command: [sleep]\n    args: [{}]\n"


def write(path: Path, shape: str, value: str, count: int) -> None:
    if shape == "entries":
        entries = "".join(
            f"  - {{name: s{i}, command: [x], critical: {value}}}\n" for i in range(count // 7)
        )
        path.write_text(HEAD + entries)
    else:
        path.write_text(ONE.replace("{}", ", ".join([value] * count)))


SHAPES = {
    "items": ("abcd", "true"),
    "entries": ("true", "x"),
    "rules": ('"{job_name}"', '"{nope}"'),
}


def peak(path: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, seconds, exit status) of `srt validate path`."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "validate", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SRT_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, time.perf_counter() - start, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the generated recipes")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="srt-invalid-bench-"))
    print(f"{'shape':8} {'size':>8} {'valid':>16} {'invalid':>16} {'ratio':>6}")
    for shape, (right, wrong) in SHAPES.items():
        good, bad = tmp / f"{shape}-valid.yaml", tmp / f"{shape}-invalid.yaml"
        write(good, shape, right, args.values)
        write(bad, shape, wrong, args.values)
        good_rss, good_s, good_rc = peak(good)
        bad_rss, bad_s, bad_rc = peak(bad)
        size = bad.stat().st_size
        note = "" if bad_rc == 2 else f"  (invalid exited {bad_rc}, expected 2)"
        print(
            f"{shape:8} {size / 1e6:6.1f}MB {good_rss / 2**20:7.0f} MiB {good_s:5.1f}s"
            f" {bad_rss / 2**20:7.0f} MiB {bad_s:5.1f}s {bad_rss / good_rss:5.2f}x{note}"
            + ("" if good_rc == 0 else f"  (valid exited {good_rc})")
        )
    if args.keep:
        print(f"recipes kept in {tmp}")
    else:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    main()
