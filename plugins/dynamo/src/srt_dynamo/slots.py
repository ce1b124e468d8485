"""Each worker process's ports and ranks, by srtctl's formulas (its ``endpoints_to_processes``).

The formulas run over every worker process of the job in layout order, so the ports of one
process depend on those before it: a table is built once per plan and looked up per
process. vLLM data parallel launched per node changes the table (a process runs several
ranks, which take several KV-event slots and serve HTTP on every node), which is why this is
not a plain function of the process's position. The formulas are core's
(:func:`worker_slots`), shared with srt-direct's engines; Dynamo adds its system port.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from srt_services.extend import (
    Recipe,
    WorkerProcess,
    WorkerSlots,
    config_value,
    worker_slots,
)

from srt_dynamo.options import MODE_OF_ROLE, PortBases


@dataclass(frozen=True, slots=True)
class Slots(WorkerSlots):
    """srtctl's slots of a process (core's formulas, shared with srt-direct), and the
    Dynamo-only one: the system port (health, metrics)."""

    sys_port: int


def vllm_data_parallel(
    recipe: Recipe, role: str, dp_launch_mode: str, gpus: int, gpus_per_node: int
) -> tuple[int, int] | None:
    """(dp size, GPUs per replica) when a vLLM worker runs one DP process per node."""
    if recipe.engine.type != "vllm" or dp_launch_mode != "per_node":
        return None
    config = recipe.roles[role].config if role in recipe.roles else {}
    dp = config_value(config, "data-parallel-size")
    if dp is None or int(dp) < 1:
        return None
    replica = int(config_value(config, "tensor-parallel-size") or 1) * int(
        config_value(config, "pipeline-parallel-size") or 1
    )
    if replica > min(gpus, gpus_per_node):
        return None
    return int(dp), replica


def slot_table(
    recipe: Recipe, processes: Sequence[WorkerProcess], bases: PortBases, dp_launch_mode: str
) -> list[Slots]:
    """Every process's slots, in ``processes`` order."""

    def data_parallel(proc: WorkerProcess) -> tuple[int, int] | None:
        worker = proc.worker
        return vllm_data_parallel(
            recipe, worker.role, dp_launch_mode, len(worker.gpus), worker.gpus_per_node
        )

    shared = worker_slots(processes, bases, data_parallel, dp_rpc_base=bases.dp_rpc)
    names = [f.name for f in fields(WorkerSlots)]
    return [
        Slots(**{n: getattr(s, n) for n in names}, sys_port=bases.system + s.process_index)
        for s in shared
    ]


def mode_of(role: str) -> str:
    return MODE_OF_ROLE[role]
