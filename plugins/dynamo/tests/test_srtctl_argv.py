"""The workers srt-dynamo builds are the ones srtctl builds for the same job.

Each case is an srtctl recipe written as schema 2 (as srt-srtctl translates it) and the argv
and environment srtctl's own code built for it (copied from the oracle's output in
``shared/data/srtctl/expected``), with srt's documented differences applied (docs/
differences.md): the recipe's copy of a flag the engine sets is dropped, ``--dump-config-to``
names a file per worker in the log directory the process sees, the mocker is told the served
model name, and every process advertises its node's address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from srt_services.extend import Plan

LOG = "/jobs/j/logs"
INFRA = [{"name": "etcd", "enabled": False}, {"name": "nats", "enabled": False}]


def recipe(**body: Any) -> dict[str, Any]:
    return {"schema": 2, "name": "t", "services": INFRA, **body}


def instance(plan: Plan, step: str) -> Any:
    return next(i for u in plan.units for i in u.instances if i.step == step)


def test_mocker_agg_as_srtctl(srt_plan: Callable[..., Plan]) -> None:
    """recipes/mocker/agg.yaml: hf:Qwen/Qwen3-0.6B, speedup_ratio 100, engine_type vllm."""
    plan = srt_plan(
        recipe(
            container="dynamo-sglang",
            resources={"gpus_per_node": 4},
            engine={
                "type": "mocker",
                "model": "Qwen/Qwen3-0.6B",
                "served_model_name": "Qwen3-0.6B",
            },
            dynamo={"request_plane": "nats"},
            frontend={"type": "dynamo"},
            roles={"agg": {"workers": 1}},
        ),
        local=False,
    )
    worker = instance(plan, "agg_0")
    srtctl = ["python3", "-m", "dynamo.mocker", "--model-path", "Qwen/Qwen3-0.6B"]
    srtctl += ["--engine-type", "vllm", "--speedup-ratio", "100.0", "--data-parallel-size", "1"]
    srtctl += ["--num-gpu-blocks-override", "16384", "--max-num-seqs", "256"]
    srtctl += ["--max-num-batched-tokens", "8192"]
    mine = list(worker.argv)
    assert mine[5:7] == ["--model-name", "Qwen3-0.6B"]
    del mine[5:7]
    assert mine == srtctl
    srtctl_env = {
        "DYN_LOG": "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn",
        "DYN_REQUEST_PLANE": "nats",
        "DYN_SKIP_SGLANG_LOG_FORMATTING": "1",
        "DYN_SYSTEM_PORT": "7500",
        "HEAD_NODE_IP": "<node0-ip>",
    }
    assert srtctl_env.items() <= worker.env.items()
    front = instance(plan, "frontend")
    assert front.argv[:3] == ["python3", "-m", "dynamo.frontend"]
    assert "--http-port=8000" in front.argv
    assert {"DYN_REQUEST_PLANE": "nats", "DYN_SKIP_SGLANG_LOG_FORMATTING": "1"}.items() <= (
        front.env.items()
    )


QWEN_CONFIG = {
    "served-model-name": "Qwen/Qwen3-32B",
    "trust-remote-code": True,
    "tensor-parallel-size": 2,
    "disaggregation-mode": "prefill",
    "mem-fraction-static": 0.90,
    "json-model-override-args": '{"rope_scaling":{"rope_type":"yarn"}}',
    "context-length": 131072,
    "page-size": 64,
}


def test_sglang_disagg_as_srtctl(
    srt_plan: Callable[..., Plan], srt_load: Callable[..., Any]
) -> None:
    """recipes/qwen3-32b/disagg-kv-dynamo.yaml: 6 prefill workers of TP2 packed on two
    nodes, bootstrap and HTTP ports counted per node, NCCL ports over the whole job."""
    decode_config = {**QWEN_CONFIG, "disaggregation-mode": "decode"}
    doc = recipe(
        container="0.5.6.post2",
        resources={"gpus_per_node": 8, "layout": "packed"},
        engine={"type": "sglang", "model": "/model"},
        dynamo={"request_plane": "nats"},
        frontend={"type": "dynamo", "args": ["--router-mode", "kv", "--router-reset-states"]},
        roles={
            "prefill": {
                "workers": 6,
                "gpus_per_worker": 2,
                "nodes": 2,
                "config": QWEN_CONFIG,
                "env": {"PYTHONUNBUFFERED": "1"},
            },
            "decode": {"workers": 2, "gpus_per_worker": 2, "config": decode_config},
        },
    )
    plan = srt_plan(doc, local=False)
    config_flags = [
        "--context-length", "131072",
        "--json-model-override-args", '{"rope_scaling":{"rope_type":"yarn"}}',
        "--mem-fraction-static", "0.9", "--page-size", "64",
        "--tensor-parallel-size", "2", "--trust-remote-code",
    ]  # fmt: skip
    for step, node, port, nccl, bootstrap in [
        ("prefill_1", "node0", "6132", "17501", "7201"),
        ("prefill_4", "node1", "6100", "17504", "7200"),
    ]:
        w = instance(plan, step)
        k = step.split("_")[1]
        assert w.argv == [
            "python3", "-m", "dynamo.sglang", "--model-path", "/model",
            "--served-model-name", "Qwen/Qwen3-32B", "--host", "0.0.0.0", "--port", port,
            "--nccl-port", nccl, "--disaggregation-mode", "prefill",
            "--disaggregation-bootstrap-port", bootstrap,
            "--dump-config-to", f"{LOG}/{node}_prefill_w{k}_config.json",
            "--request-plane", "nats", *config_flags,
        ]  # fmt: skip
        assert w.env["DYN_SYSTEM_PORT"] == str(7500 + int(k))
        assert w.env["CUDA_VISIBLE_DEVICES"] == ",".join(
            str(g) for g in range(2 * (int(k) % 4), 2 * (int(k) % 4) + 2)
        )
        assert w.env["PYTHONUNBUFFERED"] == "1"
    decode = instance(plan, "decode_0")
    assert decode.argv[13:15] == ["--disaggregation-mode", "decode"]
    assert "--disaggregation-bootstrap-port" not in decode.argv
    assert decode.argv.count("--disaggregation-mode") == 1  # srtctl repeats the recipe's
    front = instance(plan, "frontend")
    assert front.argv[-3:] == ["--router-mode", "kv", "--router-reset-states"]
    # the copies of flags the engine sets are dropped, and the recipe is told so
    warned = [(p.label, p.message) for p in srt_load(doc).warnings]
    assert (
        "roles.prefill.config.disaggregation-mode",
        "is set by srt-dynamo itself (--disaggregation-mode); this copy is dropped",
    ) in warned


def test_vllm_data_parallel_per_node_as_srtctl(srt_plan: Callable[..., Plan]) -> None:
    """recipes/vllm/deepseek-r1/disagg-h100-16gpu.yaml: a DP16 worker over two nodes is one
    process per node with 8 local ranks, which take 8 KV-event slots each."""
    config = {
        "served-model-name": "deepseek-ai/DeepSeek-R1",
        "data-parallel-hybrid-lb": True,
        "tensor-parallel-size": 1,
        "data-parallel-size": 16,
        "max-num-seqs": 512,
    }
    plan = srt_plan(
        recipe(
            container="vllm-runtime",
            resources={"gpus_per_node": 8},
            engine={"type": "vllm", "model": "/model", "options": {"connector": "nixl"}},
            dynamo={"request_plane": "nats"},
            frontend={"type": "dynamo"},
            roles={
                "prefill": {"workers": 1, "gpus_per_worker": 16, "config": config},
                "decode": {"workers": 1, "gpus_per_worker": 16, "config": config},
            },
        ),
        local=False,
    )
    follower = instance(plan, "prefill_0_node1")
    assert follower.argv[:26] == [
        "python3", "-m", "dynamo.vllm", "--model", "/model",
        "--served-model-name", "deepseek-ai/DeepSeek-R1", "--disaggregation-mode", "prefill",
        "--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}',
        "--device-ids", "0,1,2,3,4,5,6,7", "--data-parallel-size-local", "8",
        "--data-parallel-start-rank", "8", "--data-parallel-address", "<node0-ip>",
        "--data-parallel-rpc-port", "8400", "--data-parallel-hybrid-lb",
        "--request-plane", "nats", "--dump-config-to", f"{LOG}/node1_prefill_w0_config.json",
    ]  # fmt: skip
    assert follower.argv[26:] == [
        "--data-parallel-size", "16", "--max-num-seqs", "512", "--tensor-parallel-size", "1",
    ]  # fmt: skip
    env = follower.env
    assert (env["DYN_SYSTEM_PORT"], env["DYN_VLLM_KV_EVENT_PORT"]) == ("7501", "5208")
    assert (env["VLLM_NIXL_SIDE_CHANNEL_PORT"], env["VLLM_NIXL_SIDE_CHANNEL_HOST"]) == (
        "5400",
        "<node1-ip>",
    )
    assert "VLLM_PORT" not in env  # srtctl exports it, then unsets it on a multi-node worker
    assert "CUDA_VISIBLE_DEVICES" not in env  # --device-ids instead
    decode = instance(plan, "decode_0_node3")
    assert (decode.env["DYN_VLLM_KV_EVENT_PORT"], decode.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]) == (
        "5224",
        "5416",
    )
    assert "--data-parallel-address" in decode.argv
    assert decode.argv[decode.argv.index("--data-parallel-address") + 1] == "<node2-ip>"


def test_trtllm_engine_yaml_and_mpi_launch_as_srtctl(srt_plan: Callable[..., Plan]) -> None:
    """trtllm: the role's config becomes the engine's YAML file (keys sorted), the worker one
    MPI launch with a rank per GPU, numactl for disaggregated gb200 workers."""
    plan = srt_plan(
        recipe(
            container="trtllm-runtime",
            resources={"gpus_per_node": 4},
            engine={
                "type": "trtllm",
                "model": "/model",
                "served_model_name": "DeepSeek-R1",
                "options": {"gpu_type": "gb200"},
            },
            dynamo={"request_plane": "nats"},
            frontend={"type": "dynamo"},
            roles={
                "prefill": {
                    "workers": 1,
                    "gpus_per_worker": 4,
                    "config": {"tensor_parallel_size": 4, "kv_cache_config": {"dtype": "fp8"}},
                },
                "decode": {"workers": 1, "gpus_per_worker": 2, "config": {"max_batch_size": 8}},
            },
        ),
        local=False,
    )
    prefill = instance(plan, "prefill_0")
    yaml_path = f"{LOG}/trtllm_config_prefill.yaml"
    assert prefill.argv == [
        "numactl", "-m", "0,1", "trtllm-llmapi-launch",
        "python3", "-m", "dynamo.trtllm", "--model-path", "/model",
        "--served-model-name", "DeepSeek-R1", "--disaggregation-mode", "prefill",
        "--extra-engine-args", yaml_path, "--request-plane", "nats",
    ]  # fmt: skip
    assert prefill.files[yaml_path] == "kv_cache_config:\n  dtype: fp8\ntensor_parallel_size: 4\n"
    assert prefill.srun_options == {
        "mpi": "pmix",
        "ntasks": "4",
        "oversubscribe": "",
        "cpu-bind": "verbose,none",
    }
    decode = instance(plan, "decode_0")
    assert decode.srun_options["ntasks"] == "2"
    assert decode.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert decode.env["TRTLLM_EPLB_SHM_NAME"].startswith("moe_shared_")


def test_trtllm_worker_wider_than_a_node_is_one_mpi_launch_across_its_nodes(
    srt_plan: Callable[..., Plan],
) -> None:
    """trtllm/gb200-fp8/1k8k/stp/ctx1_gen1_dep32_...: a decode worker of 32 GPUs on 4-GPU
    nodes is ONE srun step over its 8 nodes with a rank per GPU (srtctl: `--mpi pmix
    --oversubscribe --cpu-bind=verbose,none --nodes 8 --ntasks 32 --nodelist ...`), the
    argv srtctl builds, and no process of its own on the other nodes."""
    plan = srt_plan(
        recipe(
            container="dynamo-trtllm",
            resources={"gpus_per_node": 4},
            engine={"type": "trtllm", "model": "/model", "served_model_name": "dsr1-fp8"},
            dynamo={"request_plane": "nats"},
            frontend={"type": "dynamo"},
            roles={
                "prefill": {"workers": 1, "gpus_per_worker": 8},
                "decode": {"workers": 1, "gpus_per_worker": 32},
            },
        ),
        local=False,
    )
    (prefill,) = plan.unit("prefill").instances
    (decode,) = plan.unit("decode").instances
    assert prefill.nodes == ["node0", "node1"]
    assert decode.node == "node2"
    assert decode.nodes == [f"node{i}" for i in range(2, 10)]
    assert decode.tasks_per_node == 4
    assert decode.gpus == [0, 1, 2, 3]
    assert plan.unit("decode").nodes == decode.nodes
    assert decode.argv == [
        "trtllm-llmapi-launch", "python3", "-m", "dynamo.trtllm", "--model-path", "/model",
        "--served-model-name", "dsr1-fp8", "--disaggregation-mode", "decode",
        "--extra-engine-args", f"{LOG}/trtllm_config_decode.yaml", "--request-plane", "nats",
    ]  # fmt: skip
    # srtctl counts every node's process in its port formulas: the follower on node1 is
    # process 1, so the decode leader's system port is 7502, as srtctl's
    assert decode.env["DYN_SYSTEM_PORT"] == "7502"
    assert "CUDA_VISIBLE_DEVICES" not in decode.env
    assert decode.srun_options == {"mpi": "pmix", "oversubscribe": "", "cpu-bind": "verbose,none"}


def flag_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_a_mocker_knob_in_a_role_config_is_the_one_that_runs(
    srt_plan: Callable[..., Plan],
) -> None:
    """recipes/mocker/kimi-trace-agg.yaml: srtctl passes its default `--max-num-seqs 256`
    and then the config's 128, and the mocker keeps the last; srt passes 128 once."""
    plan = srt_plan(
        recipe(
            resources={"gpus_per_node": 4},
            engine={"type": "mocker", "model": "/model"},
            frontend={"type": "dynamo"},
            roles={"agg": {"workers": 1, "config": {"max-num-seqs": 128, "block_size": 32}}},
        ),
        local=False,
    )
    argv = list(instance(plan, "agg_0").argv)
    assert flag_values(argv, "--max-num-seqs") == ["128"]
    assert flag_values(argv, "--block-size") == ["32"]
    assert flag_values(argv, "--num-gpu-blocks-override") == ["16384"]


def test_a_flag_the_engine_does_not_set_for_a_worker_keeps_the_recipes_copy(
    srt_plan: Callable[..., Plan],
) -> None:
    """srtctl sets --disaggregation-bootstrap-port on prefill workers only (a decode config's
    value reaches decode), and --kv-transfer-config only with a connector."""
    sglang = srt_plan(
        recipe(
            resources={"gpus_per_node": 4, "layout": "packed"},
            engine={"type": "sglang", "model": "/model"},
            frontend={"type": "dynamo"},
            roles={
                "prefill": {
                    "workers": 1,
                    "gpus_per_worker": 4,
                    "nodes": 1,
                    "config": {"disaggregation-bootstrap-port": 30001},
                },
                "decode": {
                    "workers": 1,
                    "gpus_per_worker": 4,
                    "nodes": 1,
                    "config": {"disaggregation-bootstrap-port": 30001},
                },
            },
        ),
        local=False,
    )
    prefill = list(instance(sglang, "prefill_0").argv)
    decode = list(instance(sglang, "decode_0").argv)
    assert flag_values(prefill, "--disaggregation-bootstrap-port") == ["7200"]
    assert flag_values(decode, "--disaggregation-bootstrap-port") == ["30001"]
    transfer = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    vllm = srt_plan(
        recipe(
            resources={"gpus_per_node": 4},
            engine={"type": "vllm", "model": "/model", "options": {"connector": None}},
            frontend={"type": "dynamo"},
            roles={"agg": {"workers": 1, "config": {"kv-transfer-config": transfer}}},
        ),
        local=False,
    )
    assert flag_values(list(instance(vllm, "agg_0").argv), "--kv-transfer-config") == [transfer]
