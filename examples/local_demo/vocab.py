"""The demo's log-probe service: builds the vocabulary the workers and the benchmark share.

It prints ``vocab ready`` once the file is in place (the recipe's readiness is a log probe
on that line), then stays up until it is stopped, like a tokenizer service would.
"""

from __future__ import annotations

import argparse
import os
import time

from _common import make_vocab, say, setup_output, wait_for_signal

NAME = "vocab"


def main() -> None:
    setup_output()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="Where to write the vocabulary.")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=0.3, help="Simulated build time (s).")
    args = parser.parse_args()
    say(NAME, f"building a vocabulary of {args.size} words...")
    words = make_vocab(args.size)
    time.sleep(args.delay)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(words) + "\n")
    os.replace(tmp, args.out)
    say(NAME, f"vocab ready: {len(words)} words in {args.out}")
    wait_for_signal(NAME)


if __name__ == "__main__":
    main()
