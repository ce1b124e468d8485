"""Files srtctl writes into the log dir (engine YAML, nginx.conf, ser.yaml): not in the oracle
data, so checked against the rules of doc §6-§7 on the recipes that produce them."""

from __future__ import annotations

import yaml
from oracle import data_dir  # type: ignore[import-not-found]
from srt_srtctl.loader import load_recipe_file
from srt_srtctl.plan import build_job

TRTLLM = "trtllm/b300-fp4/8k1k/stp/ctx1_gen4_tep4_batch2_eplb0_mtp0.yaml"
SERVE = "trtllm/b200-fp8/1k1k/stp/ctx1_gen3_tp8_batch1024_eplb0_mtp0_4_trtllm_serve.yaml"
NGINX = "b200-fp8/8k1k_stp_maxtpt_2.yaml"


def _plan(recipe: str):  # type: ignore[no-untyped-def]
    (variant,) = load_recipe_file(data_dir() / "recipes" / recipe)
    return build_job(variant.config)


def test_trtllm_engine_yaml_is_the_mode_dict_sorted() -> None:
    plan = _plan(TRTLLM)
    files = plan.generated_files
    assert set(files) == {"trtllm_config_prefill.yaml", "trtllm_config_decode.yaml"}
    prefill = files["trtllm_config_prefill.yaml"]
    assert yaml.safe_load(prefill) == plan.config.backend.trtllm_config.prefill
    top_keys = [line.split(":")[0] for line in prefill.splitlines() if not line.startswith(" ")]
    assert top_keys == sorted(top_keys)
    assert "cuda_graph_config: null" in prefill


def test_ser_yaml_lists_leaders() -> None:
    ser = yaml.safe_load(_plan(SERVE).generated_files["ser.yaml"])
    assert ser["hostname"] == "0.0.0.0"
    assert ser["port"] == 8000
    assert ser["context_servers"] == {"num_instances": 1, "urls": ["<ip:node0>:6100"]}
    assert ser["generation_servers"]["urls"] == [
        "<ip:node1>:6100",
        "<ip:node2>:6100",
        "<ip:node3>:6100",
    ]


def test_nginx_conf_upstream_of_routers() -> None:
    conf = _plan(NGINX).generated_files["nginx.conf"]
    assert "server <ip:node1>:8180;" in conf
    assert "server <ip:node2>:8180;" in conf
    assert "listen 8000;" in conf
    assert "keepalive 512;" in conf
    assert "client_max_body_size 45m;" in conf
    assert "keepalive_timeout 600s;" in conf
