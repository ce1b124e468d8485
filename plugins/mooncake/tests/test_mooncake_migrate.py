"""`srt migrate` of a v1 `backend.mooncake_kv_store`: the result loads, plans and verifies
with this plugin installed (in-process, through the real command and its exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from srt_services.testing import PluginSet, kit

V1 = """\
# a v1 disaggregated SGLang recipe with Mooncake's KV store
name: old-mooncake
frontend: {type: sglang, command: [python3, -m, sglang_router.launch_router]}
resources: {gpus_per_node: 8}
roles:
  prefill: {workers: 1, command: [python3, -m, sglang.launch_server]}
  decode:
    workers: 1
    command: [python3, -m, sglang.launch_server]
    env: {KEEP: "1"}
backend:
  type: sglang
  mooncake_kv_store:
    container: lmsysorg/mooncake:0.3
    master_extra_args: [--client_ttl=20]
    store_config:
      global_segment_size: 4GB
      local_buffer_size: 512MB
      protocol: rdma
      device_name: mlx5_0
    env:
      MOONCAKE_PROTOCOL: rdma
"""


def srt(plugins: PluginSet, *args: str) -> tuple[int, str, str]:
    """``srt ARGS`` in this process with the kit's plugin set (core and srt-mooncake)."""
    result = kit.run_cli(args, plugins)
    return result.code, result.stdout, result.stderr


def test_a_v1_mooncake_kv_store_migrates_to_a_master_that_loads_and_plans(
    tmp_path: Path, srt_plugins: PluginSet
) -> None:
    path = tmp_path / "v1.yaml"
    path.write_text(V1)
    code, out, err = srt(srt_plugins, "migrate", str(path))
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["services"] == [
        {
            "name": "mooncake-master",
            "type": "mooncake-master",
            "container": "lmsysorg/mooncake:0.3",
            "args": ["--client_ttl=20"],
            "options": {
                "store_config": {
                    "global_segment_size": "4GB",
                    "local_buffer_size": "512MB",
                    "protocol": "rdma",
                    "device_name": "mlx5_0",
                }
            },
        }
    ]
    assert data["engine"] == {"type": "sglang"} and "backend" not in data
    assert data["roles"]["decode"]["env"] == {"KEEP": "1", "MOONCAKE_PROTOCOL": "rdma"}
    assert out.startswith("# a v1 disaggregated SGLang recipe")  # comments kept

    plan = kit.plan(srt_plugins, out, source="migrated.yaml", job_dir="/j")
    (master,) = next(u for u in plan.units if u.name == "mooncake-master").instances
    assert master.argv[0] == "mooncake_master" and master.argv[-1] == "--client_ttl=20"
    assert master.container == "lmsysorg/mooncake:0.3"
    config = json.loads(master.files["mooncake_store_config.json"])
    assert config["global_segment_size"] == 4 * 1024**3
    assert config["master_server_address"] == f"{master.node_ip}:8700"
    for role in ("prefill", "decode"):
        (worker,) = next(u for u in plan.units if u.name == role).instances
        assert worker.env["MOONCAKE_CONFIG_PATH"] == f"{master.work_dir}/mooncake_store_config.json"
        assert worker.env["MOONCAKE_PROTOCOL"] == "rdma"  # v1 env went into every role


def test_migrate_verify_passes_and_writes_the_result(
    tmp_path: Path, srt_plugins: PluginSet
) -> None:
    path = tmp_path / "v1.yaml"
    path.write_text(V1)
    code, _, err = srt(srt_plugins, "migrate", "--verify", "--in-place", str(path))
    assert code == 0, err
    assert "not migrated" not in err and "does not load" not in err
    assert yaml.safe_load(path.read_text())["schema"] == 2
    assert (tmp_path / "v1.yaml.v1").read_text() == V1
    code, _, err = srt(srt_plugins, "validate", str(path))
    assert code == 0, err


def test_a_migrated_master_with_bad_store_config_fails_migrate(
    tmp_path: Path, srt_plugins: PluginSet
) -> None:
    path = tmp_path / "v1.yaml"
    path.write_text(V1.replace("global_segment_size: 4GB", "global_segment_size: 4GN"))
    code, out, err = srt(srt_plugins, "migrate", str(path))
    assert code == 2
    assert "the migrated recipe does not load" in err
    assert "services[mooncake-master].options.store_config.global_segment_size" in err
    assert yaml.safe_load(out)["schema"] == 2  # still shown: it is what the user fixes
