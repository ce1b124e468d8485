"""srtctl bugs we reproduce by default, each behind a named switch.

Users compare srt's results with srtctl's, so by default srt launches exactly what srtctl would,
bugs included. Each known bug has a name; `Fidelity(fixes={...})` turns individual fixes on, so
srt can fix them one at a time once decided (DIFFERENCES.md lists them with the doc section).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEVIATIONS: dict[str, tuple[str, str]] = {
    "dump-config-host-path": (
        "§6, §12",
        "sglang/vllm `--dump-config-to` gets the host log dir, which is not mounted at that path "
        "in the container; fixed: /logs/<node>_config.json",
    ),
    "torch-profiler-host-path": (
        "§12, §13",
        "SGLANG_TORCH_PROFILER_DIR gets the host log dir; fixed: /logs/profiles/<mode>",
    ),
    "setup-head-host-log-dir": (
        "§8, §12",
        "infra `setup_head.py --log-dir` gets the host log dir; fixed: /logs",
    ),
    "duplicate-flags": (
        "§6",
        "srtctl's own flags and the recipe's are both passed (sglang --disaggregation-mode, "
        "vllm --served-model-name, mocker --max-num-seqs ...); fixed: the recipe's copy of a "
        "flag srtctl already sets is dropped",
    ),
    "idle-gpus": (
        "§4",
        "the node count ignores workers x GPUs, so GPUs (or whole nodes) can sit idle; fixed: "
        "a warning names the idle GPUs",
    ),
    "unknown-benchmark-at-runtime": (
        "§1, §10",
        "an unregistered benchmark.type (gsm8k-bench) loads and fails only after the workers "
        "are up; fixed: rejected when the recipe is loaded",
    ),
    "cluster-config-invalid-ignored": (
        "§14",
        "an invalid srtslurm.yaml is ignored with one warning (aliases then stay unresolved); "
        "srt refuses it (this one is fixed by default)",
    ),
    "mounts-keyed-by-host": (
        "§12",
        "srtctl keys container mounts by host path, so two `extra_mount` entries of one host "
        "directory keep only the last; fixed: every mount is kept",
    ),
    "hf-model-without-hf-home": (
        "§3",
        "an hf: model without HF_HOME in any *_environment downloads into each node's own "
        "~/.cache; fixed: a load-time warning is kept and srt could refuse",
    ),
}

FIXED_BY_DEFAULT = frozenset({"cluster-config-invalid-ignored"})


@dataclass(frozen=True)
class Fidelity:
    """Which srtctl bugs to fix; the default reproduces srtctl (except FIXED_BY_DEFAULT)."""

    fixes: frozenset[str] = field(default_factory=lambda: FIXED_BY_DEFAULT)

    def __post_init__(self) -> None:
        unknown = set(self.fixes) - set(DEVIATIONS)
        if unknown:
            raise ValueError(f"unknown deviation name(s): {sorted(unknown)}")

    def fixed(self, name: str) -> bool:
        return name in self.fixes

    @classmethod
    def srtctl(cls) -> Fidelity:
        """Everything as srtctl does it, including ignoring an invalid cluster config."""
        return cls(fixes=frozenset())

    @classmethod
    def all_fixed(cls) -> Fidelity:
        return cls(fixes=frozenset(DEVIATIONS))
