"""srt-direct builds what srtctl builds for ``frontend.type`` sglang, vllm and trtllm_serve.

Expected argv are srtctl's own (the oracle's output in ``shared/data/srtctl/expected``), with
srt's documented differences: no Dynamo variables for engines that run no Dynamo, files in
the log directory the process sees. Nothing here runs sglang, vLLM or TensorRT-LLM (they
need GPUs): these are plan tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from srt_services.extend import Plan

LOG = "/jobs/j/logs"
QWEN = {
    "served-model-name": "Qwen/Qwen3-32B",
    "trust-remote-code": True,
    "tensor-parallel-size": 2,
    "mem-fraction-static": 0.90,
    "page-size": 64,
}


def instance(plan: Plan, step: str) -> Any:
    return next(i for u in plan.units for i in u.instances if i.step == step)


def test_sglang_router_in_front_of_eight_workers(srt_plan: Callable[..., Plan]) -> None:
    """recipes/qwen3-32b/agg-kv-sglang.yaml: 8 TP2 workers on two nodes behind the router."""
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "container": "0.5.6.post2",
            "resources": {"gpus_per_node": 8},
            "engine": {"type": "sglang", "model": "/model"},
            "frontend": {"type": "sglang", "args": ["--policy", "cache_aware"]},
            "roles": {"agg": {"workers": 8, "gpus_per_worker": 2, "config": QWEN}},
        }
    )
    w5 = instance(plan, "agg_5")
    assert w5.node == "node1"
    assert w5.argv == [
        "python3", "-m", "sglang.launch_server", "--model-path", "/model",
        "--served-model-name", "Qwen/Qwen3-32B", "--host", "0.0.0.0", "--port", "6132",
        "--nccl-port", "17505", "--mem-fraction-static", "0.9", "--page-size", "64",
        "--tensor-parallel-size", "2", "--trust-remote-code",
    ]  # fmt: skip
    assert w5.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert not any(k.startswith("DYN_") for k in w5.env)
    router = instance(plan, "frontend")
    urls = [f"http://<node{n}-ip>:{6100 + 32 * s}" for n in (0, 1) for s in range(4)]
    assert router.argv == [
        "python", "-m", "sglang_router.launch_router", "--worker-urls", *urls,
        "--host", "0.0.0.0", "--port", "8000", "--policy", "cache_aware",
    ]  # fmt: skip
    assert router.readiness is not None
    assert router.readiness.config["url"] == "http://<node0-ip>:8000/health"


def test_sglang_router_disaggregated_with_grpc_decode(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "resources": {"gpus_per_node": 4},
            "engine": {"type": "sglang", "model": "/m/x"},
            "frontend": {"type": "sglang", "port": 9000},
            "roles": {
                "prefill": {"workers": 2, "gpus_per_worker": 2},
                "decode": {"workers": 1, "gpus_per_worker": 4, "config": {"grpc-mode": True}},
            },
        }
    )
    router = instance(plan, "frontend")
    assert router.argv[3:] == [
        "--pd-disaggregation",
        "--prefill", "http://<node0-ip>:6100", "7200",
        "--prefill", "http://<node0-ip>:6132", "7201",
        "--decode", "grpc://<node1-ip>:6100",
        "--host", "0.0.0.0", "--port", "9000",
    ]  # fmt: skip
    p1 = instance(plan, "prefill_1")
    assert p1.argv[13:17] == [
        "--disaggregation-mode",
        "prefill",
        "--disaggregation-bootstrap-port",
        "7201",
    ]
    assert sorted(p1.ports) == [6132, 7201, 17501]


def test_vllm_serve_answers_the_public_port(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "resources": {"gpus_per_node": 8},
            "engine": {"type": "vllm", "model": "Qwen/Qwen3-0.6B"},
            "frontend": {"type": "vllm", "port": 8000},
            "benchmark": {"type": "command", "command": ["bench"]},
            "roles": {
                "agg": {
                    "workers": 1,
                    "gpus_per_worker": 16,
                    "config": {"tensor-parallel-size": 16, "port": 1234, "api-server-count": 4},
                }
            },
        }
    )
    assert not [u for u in plan.units if u.category == "frontend"]
    leader, follower = instance(plan, "agg_0_node0"), instance(plan, "agg_0_node1")
    assert leader.argv == [
        "vllm", "serve", "Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--port", "8000",
        "--master-addr", "<node0-ip>", "--nnodes", "2", "--node-rank", "0",
        "--api-server-count", "4", "--tensor-parallel-size", "16",
    ]  # fmt: skip
    assert follower.argv == [
        "vllm", "serve", "Qwen/Qwen3-0.6B", "--master-addr", "<node0-ip>", "--nnodes", "2",
        "--node-rank", "1", "--headless", "--tensor-parallel-size", "16",
    ]  # fmt: skip
    assert leader.readiness is not None
    body = leader.readiness.config["body"]
    assert (body["json"], body["equals"]) == ("data[].id", "Qwen/Qwen3-0.6B")
    assert follower.readiness is None
    assert "VLLM_PORT" not in leader.env  # a worker over two nodes: srtctl unsets it
    assert [p["port"] for p in plan.ports if p["node"] == "node0"] == [8000]
    bench = plan.unit("benchmark").instances[0]
    assert bench.env["SRT_FRONTEND_URL"] == "http://<node0-ip>:8000"


def test_vllm_refuses_what_it_cannot_serve(srt_problems: Callable[..., Any]) -> None:
    found = srt_problems(
        "schema: 2\nname: t\nengine: {type: vllm, model: /m}\nfrontend: {type: vllm}\n"
        "roles: {prefill: {}, decode: {}}\n"
    )
    assert {p.label for p in found} == {"roles.prefill", "roles.decode"}
    assert all("serves one aggregated worker" in p.message for p in found)


def test_trtllm_serve_disaggregated_as_srtctl(srt_plan: Callable[..., Plan]) -> None:
    """recipes/trtllm/b200-fp8/1k1k/stp/ctx1_gen3_..._trtllm_serve.yaml: one context and
    three generation servers, each on its own node, behind `trtllm-serve disaggregated`."""
    prefill_config = {
        "tensor_parallel_size": 8,
        "moe_expert_parallel_size": 8,
        "pipeline_parallel_size": 1,
        "max_batch_size": 32,
    }
    decode_config = {**prefill_config, "moe_expert_parallel_size": 1, "max_batch_size": 1024}
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "container": "trtllm",
            "resources": {"gpus_per_node": 8},
            "engine": {"type": "trtllm", "model": "/model"},
            "frontend": {"type": "trtllm-serve"},
            "roles": {
                "prefill": {"workers": 1, "config": prefill_config},
                "decode": {"workers": 3, "config": decode_config},
            },
        }
    )
    prefill = instance(plan, "prefill_0")
    assert prefill.argv == [
        "trtllm-llmapi-launch", "trtllm-serve", "/model", "--host", "0.0.0.0",
        "--port", "6100", "--tensor_parallel_size", "8", "--moe_expert_parallel_size", "8",
        "--pipeline_parallel_size", "1", "--config", f"{LOG}/trtllm_config_prefill.yaml",
    ]  # fmt: skip
    assert prefill.srun_options["ntasks"] == "8"
    assert yaml.safe_load(prefill.files[f"{LOG}/trtllm_config_prefill.yaml"]) == prefill_config
    orchestrator = instance(plan, "frontend")
    assert orchestrator.argv == ["trtllm-serve", "disaggregated", "--config", f"{LOG}/ser.yaml"]
    assert yaml.safe_load(orchestrator.files[f"{LOG}/ser.yaml"]) == {
        "hostname": "0.0.0.0",
        "port": 8000,
        "context_servers": {"num_instances": 1, "urls": ["<node0-ip>:6100"]},
        "generation_servers": {
            "num_instances": 3,
            "urls": ["<node1-ip>:6100", "<node2-ip>:6100", "<node3-ip>:6100"],
        },
    }
    assert orchestrator.srun_options == {"mpi": "pmix"}


def test_trtllm_serve_worker_wider_than_a_node_is_one_mpi_launch(
    srt_plan: Callable[..., Plan],
) -> None:
    """A 16-GPU generation server on 8-GPU nodes: one launch over its two nodes, a rank per
    GPU (srtctl: `--nodes 2 --ntasks 16 --nodelist a,b --mpi pmix`), its leader's address in
    ser.yaml."""
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "container": "trtllm",
            "resources": {"gpus_per_node": 8},
            "engine": {"type": "trtllm", "model": "/model"},
            "frontend": {"type": "trtllm-serve"},
            "roles": {
                "prefill": {"workers": 1},
                "decode": {"workers": 1, "gpus_per_worker": 16},
            },
        }
    )
    (decode,) = plan.unit("decode").instances
    assert (decode.node, decode.nodes, decode.tasks_per_node) == ("node1", ["node1", "node2"], 8)
    assert decode.srun_options == {"mpi": "pmix", "oversubscribe": "", "cpu-bind": "verbose,none"}
    assert decode.argv[5:7] == ["--port", "6100"]
    ser = yaml.safe_load(instance(plan, "frontend").files[f"{LOG}/ser.yaml"])
    assert ser["generation_servers"] == {"num_instances": 1, "urls": ["<node1-ip>:6100"]}


def test_trtllm_serve_aggregated_worker_serves_the_public_port(
    srt_plan: Callable[..., Plan],
) -> None:
    plan = srt_plan(
        {
            "schema": 2,
            "name": "t",
            "resources": {"gpus_per_node": 4},
            "engine": {"type": "trtllm", "model": "/model"},
            "frontend": {"type": "trtllm-serve", "port": 8123},
            "benchmark": {"type": "command", "command": ["bench"]},
            "roles": {"agg": {"workers": 1, "gpus_per_worker": 4}},
        }
    )
    assert not [u for u in plan.units if u.category == "frontend"]
    worker = instance(plan, "agg_0")
    assert worker.argv[4:7] == ["0.0.0.0", "--port", "8123"]
    assert plan.unit("benchmark").instances[0].env["SRT_FRONTEND_URL"].endswith(":8123")


def test_hand_written_commands_are_the_recipes_business(
    srt_plan: Callable[..., Plan], srt_problems: Callable[..., Any]
) -> None:
    """A recipe written before srt-direct was installed (frontend.type vllm or trtllm-serve,
    every role with its own command) keeps loading: the engines judge only what they build."""
    for front, engine in (("vllm", "vllm"), ("trtllm-serve", "trtllm")):
        plan = srt_plan(
            {
                "schema": 2,
                "name": "t",
                "engine": {"type": engine},
                "frontend": {"type": front, "command": ["front"]},
                "roles": {
                    "prefill": {"command": ["p"]},
                    "decode": {"command": ["d"]},
                    "agg": {"command": ["a"], "workers": 3},
                },
            }
        )
        assert instance(plan, "agg_2").argv == ["a"], front
        assert instance(plan, "prefill_0").argv == ["p"], front
    # the same shape without commands is refused, role by role
    found = srt_problems(
        "schema: 2\nname: t\nengine: {type: vllm, model: /m}\nfrontend: {type: vllm}\n"
        "roles: {decode: {}, agg: {workers: 2, command: [a]}}\n"
    )
    assert {p.label for p in found} == {"roles.decode"}
