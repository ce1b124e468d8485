"""srtctl's worker rules that srt-dynamo and srt-direct share through ``srt_services.extend``.

Both plugins pin their argv against srtctl's own; these pin the shared rules in core, so a
change here is caught by core's tests alone, without either engine installed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest
from srt_services.extend import (
    SGLANG_SERVER_FLAGS,
    Layout,
    Node,
    Worker,
    WorkerProcess,
    config_value,
    sglang_kv_events_config,
    sglang_server_flags,
    worker_processes,
    worker_slots,
)

if TYPE_CHECKING:
    from srt_services.extend import SlotBases


#: srtctl's default bases (an engine's options hold them, as any object with these fields)
BASES = cast(
    "SlotBases",
    SimpleNamespace(http=6100, bootstrap=7200, kv_events=5200, nixl=5400, nccl=17500, vllm=20000),
)


def processes(*workers: tuple[str, tuple[Node, ...], int]) -> list[WorkerProcess]:
    """Every process of workers given as (role, nodes, GPUs), in that order."""
    built = tuple(
        Worker(role, i, nodes, tuple(range(gpus)), 0, None, 4)
        for i, (role, nodes, gpus) in enumerate(workers)
    )
    nodes = tuple(dict.fromkeys(n for w in built for n in w.nodes))
    layout = Layout(nodes, nodes[0], nodes[0], nodes[0], False, False, nodes, {}, built, {}, 4)
    return worker_processes(layout)


N0, N1 = Node("n0", "10.0.0.1", 0), Node("n1", "10.0.0.2", 1)


def test_ports_follow_srtctls_formulas_over_the_whole_job() -> None:
    procs = processes(("prefill", (N0,), 2), ("prefill", (N0,), 2), ("decode", (N1, N0), 8))
    table = worker_slots(procs, BASES)
    got = [
        (s.http_port, s.bootstrap_port, s.kv_events_port, s.nixl_port, s.nccl_port, s.vllm_port)
        for s in table
    ]
    assert got == [
        (6100, 7200, 5200, 5400, 17500, 20000),
        # the second leader on n0: the next HTTP stride and the next bootstrap port there
        (6132, 7201, 5201, 5401, 17501, 20050),
        (6100, None, 5202, 5402, 17502, 20100),
        # the decode worker's follower on n0 serves no HTTP
        (None, None, 5203, 5403, 17503, 20150),
    ]
    assert [s.node_rank for s in table] == [0, 0, 0, 1]
    assert [s.process_index for s in table] == [0, 1, 2, 3]


def test_prefill_bootstrap_ports_count_per_host_and_loopback_nodes_are_one_host() -> None:
    apart = processes(("prefill", (N0,), 1), ("prefill", (N1,), 1))
    assert [s.bootstrap_port for s in worker_slots(apart, BASES)] == [7200, 7200]
    local = (Node("a", "127.0.0.1", 0), Node("b", "127.0.0.2", 1))
    shared = processes(("prefill", (local[0],), 1), ("prefill", (local[1],), 1))
    assert [s.bootstrap_port for s in worker_slots(shared, BASES)] == [7200, 7201]


def test_data_parallel_per_node_takes_a_kv_slot_per_rank() -> None:
    procs = processes(("agg", (N0,), 4), ("agg", (N0,), 1))

    def dp(proc: WorkerProcess) -> tuple[int, int] | None:
        return (4, 1) if proc.worker.index == 0 else None

    with pytest.raises(ValueError, match="dp_rpc_base"):
        worker_slots(procs, BASES, dp)
    first, second = worker_slots(procs, BASES, dp, dp_rpc_base=8400)
    assert (first.dp_local, first.dp_rpc_port, first.kv_events_port) == (4, 8400, 5200)
    assert (second.dp_local, second.dp_rpc_port) == (None, None)
    assert (second.kv_events_port, second.nixl_port, second.http_port) == (5204, 5404, 6132)


def test_config_value_reads_either_spelling() -> None:
    assert config_value({"served_model_name": "m"}, "served-model-name") == "m"
    assert config_value({"served-model-name": "m"}, "served_model_name") == "m"
    assert config_value({}, "served-model-name") is None
    assert config_value(None, "x") is None


def test_sglang_server_flags_of_a_follower_across_nodes() -> None:
    procs = processes(("prefill", (N0, N1), 8))
    table = worker_slots(procs, BASES)
    argv = sglang_server_flags(procs[1], table[1], "/models/m", "m", 8300)
    assert argv == [
        "--model-path", "/models/m", "--served-model-name", "m",
        "--host", "0.0.0.0", "--port", "0",
        "--nccl-port", "17501",
        "--disaggregation-mode", "prefill",
        "--disaggregation-bootstrap-port", "7200",
        "--dist-init-addr", "10.0.0.1:8300", "--nnodes", "2", "--node-rank", "1",
    ]  # fmt: skip
    flags = {a[2:] for a in argv if a.startswith("--")} | {"kv-events-config"}
    assert flags == SGLANG_SERVER_FLAGS


def test_sglang_kv_events_config() -> None:
    assert sglang_kv_events_config(False, 5200) is None
    assert sglang_kv_events_config(True, 5201) == {
        "publisher": "zmq",
        "topic": "kv-events",
        "endpoint": "tcp://*:5201",
    }
    merged = sglang_kv_events_config({"topic": "mine"}, 5202)
    assert merged == {"publisher": "zmq", "topic": "mine", "endpoint": "tcp://*:5202"}
