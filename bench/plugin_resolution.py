"""Plugin resolution cost with 50 installed plugin distributions, against raw baselines.

Run: ``python bench/plugin_resolution.py [--plugins 50] [--repeat 30]``.

Installs 50 dummy plugin distributions (real ``.dist-info`` directories with entry points,
one kind each, declared under ``srt.provides``) into a temporary directory put on
``sys.path``, then measures in the same run:

(a) resolving one kind the way ``srt validate`` does: a fresh ``PluginSet`` (entry-point scan
    cache cleared, the plugin module not yet imported) and ``kind("dummy-17")``;
(b) the bare baseline ``importlib.metadata.entry_points(group="srt.plugins")``;
(c) ``srt --help`` wall time with and without the 50 installed (it must not grow: ``--help``
    neither scans entry points nor imports plugins).

It prints medians and ratios (targets: a/b <= 1.5, c ratio ~ 1.0) and asserts nothing;
timing assertions belong in no test.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "plugins"))

import distgen  # noqa: E402
from srt_services.plugins import discovery  # noqa: E402
from srt_services.plugins.manager import PluginSet  # noqa: E402
from srt_services.site_config import SiteConfig  # noqa: E402

PREFIX = "srt-benchdummy"


def install(site: Path, count: int) -> None:
    for i in range(count):
        distgen.write(site, distgen.plugin(f"{PREFIX}-{i:02d}", kinds=[f"dummy-{i}"]))


def interleaved(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    before: dict[str, Callable[[], None]] | None = None,
) -> dict[str, float]:
    """Median time of each function, sampled in alternation so that load from other
    processes (this runs on shared 2-core machines) hits every variant alike."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            if before and name in before:
                before[name]()
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def forget_dummies() -> None:
    discovery.clear_cache()
    for name in list(sys.modules):
        if name.startswith(PREFIX.replace("-", "_")):
            del sys.modules[name]


def resolve_kind(target: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    plugins = PluginSet(env=env, site=SiteConfig())
    kind = plugins.kind(target)
    assert kind.name == target


def baseline_scan() -> None:
    importlib.metadata.entry_points(group=discovery.PLUGIN_GROUP)


def help_runner(pythonpath: str | None) -> Callable[[], object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    argv = [sys.executable, "-m", "srt_services", "--help"]
    return lambda: subprocess.run(argv, env=env, capture_output=True, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plugins", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--help-repeat", type=int, default=9)
    args = parser.parse_args()
    target = f"dummy-{min(17, args.plugins - 1)}"

    with tempfile.TemporaryDirectory(prefix="srt-bench-") as tmp:
        site = Path(tmp) / "site-packages"
        install(site, args.plugins)
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
        installed = len(list(importlib.metadata.distributions()))
        found = len(importlib.metadata.entry_points(group=discovery.PLUGIN_GROUP))

        # Warm every path once (module imports, the file-system caches they share).
        forget_dummies()
        resolve_kind(target)
        baseline_scan()
        times = interleaved(
            {
                "baseline": baseline_scan,
                "resolve": lambda: resolve_kind(target),
                "scan": discovery.scan,
            },
            args.repeat,
            before={"resolve": forget_dummies, "scan": discovery.clear_cache},
        )
        scan, resolve, scan_only = times["baseline"], times["resolve"], times["scan"]
        helps = {"without": help_runner(None), "with": help_runner(str(site))}
        for run in helps.values():
            run()
        help_times = interleaved(helps, args.help_repeat)
        help_before, help_after = help_times["without"], help_times["with"]

    print(f"distributions visible: {installed}; srt.plugins entry points: {found}")
    print(f"(b) bare entry_points(group='srt.plugins'):    {scan * 1e3:8.2f} ms")
    print(f"    srt's cached scan (both groups, no import): {scan_only * 1e3:8.2f} ms")
    print(f"(a) fresh PluginSet + kind({target!r}):        {resolve * 1e3:8.2f} ms")
    print(f"    ratio a/b: {resolve / scan:.2f}  (target <= 1.5)")
    print(f"(c) srt --help without the {args.plugins}: {help_before * 1e3:8.1f} ms")
    print(f"    srt --help with the {args.plugins}:    {help_after * 1e3:8.1f} ms")
    print(f"    ratio with/without: {help_after / help_before:.2f}  (target ~1.0: must not grow)")


if __name__ == "__main__":
    main()
