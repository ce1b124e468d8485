"""``python -m srt_benchmarks <type> --key value...``: the client process a benchmark kind
plans. Reads the frontend's address (``SRT_FRONTEND_URL``) and the result file
(``SRT_BENCHMARK_RESULT``) from the environment srt gives it, runs, writes the summary there
(and to stdout) and exits 1 when the benchmark failed its thresholds, 2 on bad usage."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from srt_services.extend import RESULT_VAR

from srt_benchmarks import accuracy, serving, trace
from srt_benchmarks.flags import from_argv
from srt_benchmarks.options import (
    GpqaOptions,
    Gsm8kOptions,
    MooncakeRouterOptions,
    SaBenchOptions,
    TraceReplayOptions,
)

MODELS: dict[str, type[Any]] = {
    "sa-bench": SaBenchOptions,
    "gsm8k": Gsm8kOptions,
    "gpqa": GpqaOptions,
    "mooncake-router": MooncakeRouterOptions,
    "trace-replay": TraceReplayOptions,
}
URL_VAR = "SRT_FRONTEND_URL"


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def write_result(result: dict[str, Any]) -> None:
    """Atomically, so srt never copies half a file into result.json."""
    path = os.environ.get(RESULT_VAR)
    text = json.dumps(result, indent=1, allow_nan=False)
    print(text, flush=True)
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in MODELS:
        _log(f"usage: python -m srt_benchmarks {{{','.join(MODELS)}}} --key value...")
        return 2
    kind, words = args[0], args[1:]
    try:
        options = from_argv(MODELS[kind], words)
    except (ValueError, ValidationError) as exc:
        _log(f"{kind}: {exc}")
        return 2
    base = os.environ.get(URL_VAR, "").rstrip("/")
    if not base:
        _log(f"{kind}: {URL_VAR} is not set (srt sets it when the job has a frontend)")
        return 2
    if isinstance(options, SaBenchOptions):
        result, passed = asyncio.run(serving.run(base, options, _log))
    elif isinstance(options, Gsm8kOptions | GpqaOptions):
        result, passed = asyncio.run(accuracy.run(kind, base, options, _log))
    elif isinstance(options, MooncakeRouterOptions | TraceReplayOptions):
        result, passed = asyncio.run(trace.run(kind, base, options, _log))
    else:  # pragma: no cover - MODELS holds only these
        raise AssertionError(kind)
    write_result(result)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
