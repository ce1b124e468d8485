"""``python -m oarbank_protocol.schemas [--check] [--out DIR]``: regenerate or verify the files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oarbank_protocol.schemas import SCHEMA_DIR, export_schemas, stale_schemas


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oarbank_protocol.schemas")
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help="target directory")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_schemas(args.out)
        for name in stale:
            print(f"stale: {args.out / name}", file=sys.stderr)
        return 1 if stale else 0
    for path in export_schemas(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
