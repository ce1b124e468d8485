"""Strict loading with every problem reported at its key path (doc §1, §2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from srt_srtctl.cluster import (
    ClusterConfig,
    ClusterHealthCheck,
    find_cluster_config,
    parse_cluster_config,
)
from srt_srtctl.errors import ClusterConfigError, RecipeError
from srt_srtctl.loader import load_config_dict, load_variants


def _recipe(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "t",
        "model": {"path": "dsr1", "container": "img", "precision": "fp8"},
        "resources": {"gpu_type": "b200"},
    }
    base.update(extra)
    return base


def test_defaults() -> None:
    cfg = load_config_dict(_recipe())
    assert cfg.backend_type == "sglang"
    assert cfg.resources.gpus_per_node == 4
    assert cfg.frontend.type == "dynamo"
    assert cfg.frontend.enable_multiple_frontends is True
    assert cfg.frontend.num_additional_frontends == 9
    assert cfg.dynamo.version == "0.8.0"
    assert cfg.dynamo.request_plane == "tcp"
    assert cfg.health_check.max_attempts == 180
    assert cfg.benchmark.type == "manual"
    assert cfg.resources.num_agg == 1


def test_all_problems_with_paths() -> None:
    bad = _recipe(
        resources={"gpu_type": "b200", "prefill_nodez": 1},
        backend={"type": "sglang", "prefill_environment": {"PYTHONUNBUFFERED": 1}},
        environment={"A": 2},
    )
    del bad["name"]
    with pytest.raises(RecipeError) as err:
        load_config_dict(bad)
    got = {(p.path, p.message) for p in err.value.problems}
    assert (("resources", "prefill_nodez"), "Unknown field.") in got
    assert (("backend", "prefill_environment", "PYTHONUNBUFFERED"), "Not a valid string.") in got
    assert (("environment", "A"), "Not a valid string.") in got
    assert (("name",), "Missing data for required field.") in got


def test_backend_keys_checked_against_its_type() -> None:
    with pytest.raises(RecipeError) as err:
        load_config_dict(_recipe(backend={"type": "sglang", "trtllm_config": {}}))
    assert err.value.problems[0].path == ("backend", "trtllm_config")


def test_lock_section_dropped() -> None:
    assert load_config_dict(_recipe(lock={"anything": 1})).name == "t"


def test_trtllm_serve_with_multiple_frontends_rejected() -> None:
    with pytest.raises(RecipeError, match="enable_multiple_frontends"):
        load_config_dict(_recipe(frontend={"type": "trtllm_serve"}))


def test_variant_problems_are_prefixed_by_selector() -> None:
    data = {"base": _recipe(), "override_x": {"resources": {"bogus": 1}}}
    with pytest.raises(RecipeError) as err:
        load_variants(data)
    assert err.value.problems[0].path == ("<override_x>", "resources", "bogus")


def test_cluster_aliases_and_defaults() -> None:
    cluster = ClusterConfig(
        model_paths={"dsr1": "/models/DeepSeek-R1"},
        containers={"img": "nvcr.io/x:1"},
        default_account="acct",
        default_sbatch_directives={"mem": "0", "cpus-per-task": "8"},
        default_health_check=ClusterHealthCheck(max_attempts=360, interval_seconds=10),
    )
    cfg = load_config_dict(_recipe(sbatch_directives={"mem": "10G"}), cluster)
    assert cfg.model.path == "/models/DeepSeek-R1"
    assert cfg.model.container == "nvcr.io/x:1"
    assert cfg.slurm.account == "acct"
    assert cfg.sbatch_directives == {"mem": "10G", "cpus-per-task": "8"}
    assert cfg.health_check.max_attempts == 360


def test_invalid_cluster_config_is_an_error() -> None:
    with pytest.raises(ClusterConfigError) as err:
        parse_cluster_config({"default_container": "x"})
    assert err.value.problems[0].path == ("default_container",)


def test_find_cluster_config(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deeper = deep / "c"
    deeper.mkdir(parents=True)
    (tmp_path / "srtslurm.yaml").write_text("default_account: x\n")
    assert find_cluster_config(deep, environ={}) == tmp_path / "srtslurm.yaml"
    assert find_cluster_config(deeper, environ={}) is None  # only ./, ../ and ../../
    explicit = find_cluster_config(deep, environ={"SRTSLURM_CONFIG": "/etc/c.yaml"})
    assert explicit == Path("/etc/c.yaml")
