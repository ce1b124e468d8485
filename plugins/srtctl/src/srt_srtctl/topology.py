"""How many nodes and frontends srtctl gives a job (doc §4, §7).

Workers are laid over nodes by core's packed layout (``resources.layout: packed``) and built
by the engines; the format needs only srtctl's counts, to translate the recipe into the
roles' node counts and the frontend replicas.
"""

from __future__ import annotations

import math

from srt_srtctl.schema import SrtConfig, VLLMBackend

ROLES = ("prefill", "decode", "agg")


def worker_counts(config: SrtConfig) -> dict[str, int]:
    r = config.resources
    return {"prefill": r.num_prefill, "decode": r.num_decode, "agg": r.num_agg}


def gpus_per_worker(config: SrtConfig) -> dict[str, int]:
    r = config.resources
    return {"prefill": r.prefill_gpus, "decode": r.decode_gpus, "agg": r.agg_gpus}


def colocates_prefill_and_decode(config: SrtConfig) -> bool:
    b = config.backend
    return isinstance(b, VLLMBackend) and (
        b.allow_prefill_decode_colocation or b.allow_prefill_decode_colocation_across_nodes
    )


def worker_node_count(config: SrtConfig) -> int:
    """srtctl's worker nodes: the roles' node counts, never derived from workers x GPUs
    (colocated vLLM prefill/decode: as few as their GPUs need)."""
    r = config.resources
    if colocates_prefill_and_decode(config):
        counts, gpus = worker_counts(config), gpus_per_worker(config)
        total = sum(counts[role] * gpus[role] for role in ROLES)
        return max(1, math.ceil(total / r.gpus_per_node))
    if r.is_disaggregated:
        return (r.prefill_nodes or 0) + (r.decode_nodes or 0)
    return r.agg_nodes if r.agg_nodes is not None else 1


def frontend_count(config: SrtConfig) -> int:
    """How many frontends srtctl starts: one, or with `enable_multiple_frontends` one per
    worker node but the head, up to `num_additional_frontends + 1` (doc §7)."""
    fe = config.frontend
    workers = worker_node_count(config)
    if not fe.enable_multiple_frontends or workers == 1:
        return 1
    return max(1, min(fe.num_additional_frontends + 1, workers - 1))
