"""srtctl recipes through srt's own commands: recognised as they are, each variant a job,
problems at the line of the original file, srtslurm.yaml where srtctl reads it, and
``srt migrate --from srtctl`` writing the translation with the comments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from oracle import data_dir, plugins  # type: ignore[import-not-found]
from srt_services.testing import kit

#: No srtslurm.yaml from the caller's environment (srtctl's variable; empty means unset).
NO_CLUSTER = {"SRTSLURM_CONFIG": ""}

PLAIN = """\
# a small aggregated job
name: small
model:
  path: "hf:Qwen/Qwen3-0.6B"
  container: dynamo-sglang
  precision: fp16
resources:
  gpu_type: gb200
  gpus_per_node: 4
  agg_nodes: 1
  agg_workers: 1
dynamo:
  install: false
frontend:
  type: dynamo
  enable_multiple_frontends: false
backend:
  type: mocker
  speedup_ratio: 50   # faster than real time
benchmark:
  type: manual
"""


@pytest.fixture(scope="module")
def found() -> Any:
    return plugins()


def run(args: list[str], found: Any, **env: str) -> kit.CliResult:
    return kit.run_cli(args, found, env={**NO_CLUSTER, **env})


def write(tmp_path: Path, text: str, name: str = "recipe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_plain_recipe_is_recognised_and_planned(found: Any, tmp_path: Path) -> None:
    recipe = write(tmp_path, PLAIN)
    r = run(["dry-run", str(recipe), "--json"], found)
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["job_name"] == "small"
    worker = next(u for u in plan["units"] if u["name"] == "agg")["instances"][0]
    assert worker["argv"][1:3] == ["-m", "dynamo.mocker"]
    assert worker["argv"][worker["argv"].index("--speedup-ratio") + 1] == "50.0"
    assert worker["gpus"] == [0, 1, 2, 3]


def test_a_declared_format_is_read_even_without_the_shape(found: Any, tmp_path: Path) -> None:
    recipe = write(tmp_path, "format: srtctl\nname: x\n")
    r = run(["validate", str(recipe)], found)
    assert r.code == 2
    assert f"{recipe}:1:1: model: Missing data for required field." in r.stderr, r.stderr


def test_a_schema_2_recipe_is_not_claimed() -> None:
    from srt_srtctl.recipe_format import SrtctlFormat

    fmt = SrtctlFormat()
    assert not fmt.recognises({"schema": 2, "model": {}, "resources": {}})
    assert fmt.recognises({"model": {"path": "m"}, "resources": {"gpu_type": "h100"}})
    assert fmt.recognises({"base": {"name": "x"}, "override_a": {}})
    assert not fmt.recognises({"name": "x", "services": []})


@pytest.mark.parametrize(
    ("edit", "where", "message"),
    [
        (("resources:\n", "resources:\n  gpus_per_nod: 4\n"), "8:3", "resources.gpus_per_nod"),
        (("  agg_workers: 1\n", "  agg_workers: many\n"), "11:3", "resources.agg_workers"),
        (("  type: mocker\n", "  type: tensorflow\n"), "18:3", "backend.type: Must be one of"),
        (
            ("  type: manual\n", "  type: gsm8k-bench\n"),
            "21:3",
            "benchmark.type: unknown benchmark type 'gsm8k-bench'",
        ),
        (
            ("precision: fp16\n", "precision: [fp16]\n"),
            "6:3",
            "model.precision: Not a valid string",
        ),
        (
            ("  enable_multiple_frontends: false\n", "  dedicated_node: true\n"),
            "16:3",
            "frontend.dedicated_node: a frontend on a node of its own is not supported",
        ),
    ],
)
def test_bad_input_is_refused_at_its_line(
    found: Any, tmp_path: Path, edit: tuple[str, str], where: str, message: str
) -> None:
    recipe = write(tmp_path, PLAIN.replace(*edit, 1))
    r = run(["dry-run", str(recipe)], found)
    assert r.code == 2, r.stdout
    assert f"{recipe}:{where}: {message}" in r.stderr, r.stderr


SWEEP = """\
base:
  name: sweep
  model: {path: "hf:Qwen/Qwen3-0.6B", container: c, precision: fp16}
  resources: {gpu_type: h100, gpus_per_node: 4, agg_nodes: 1, agg_workers: 1}
  dynamo: {install: false}
  frontend: {type: dynamo, enable_multiple_frontends: false}
  backend: {type: mocker}
override_fast:
  backend:
    speedup_ratio: 1000
zip_override_tp:
  backend:
    max_num_seqs: [8, 16]
    block_size: [16]
"""


def test_a_problem_of_a_variant_is_located_in_its_override_section(
    found: Any, tmp_path: Path
) -> None:
    recipe = write(tmp_path, SWEEP.replace("max_num_seqs: [8, 16]", "max_num_seqs: [8, lots]"))
    r = run(["validate", str(recipe), "--variant", "zip_override_tp[1]"], found)
    assert r.code == 2
    assert (
        f"{recipe}:13:23: zip_override_tp.backend.max_num_seqs[1]: Input should be a valid integer"
        in r.stderr
    ), r.stderr
    base = write(tmp_path, SWEEP.replace("agg_workers: 1}", "agg_workers: x}"), "base.yaml")
    r = run(["validate", str(base), "--variant", "override_fast"], found)
    assert r.code == 2
    assert (
        f"{base}:4:63: base.resources.agg_workers: Input should be a valid integer" in r.stderr
    ), r.stderr


def test_a_sweep_dry_runs_as_srtctl_variants(found: Any, tmp_path: Path) -> None:
    recipe = write(tmp_path, SWEEP)
    r = run(["dry-run", str(recipe), "--json"], found)
    assert r.code == 0, r.stderr
    variants = json.loads(r.stdout)["variants"]
    assert [(v["variant"], v["selector"]) for v in variants] == [
        ("sweep_fast", "override_fast"),
        ("sweep_tp_0", "zip_override_tp[0]"),
        ("sweep_tp_1", "zip_override_tp[1]"),
    ]
    argv = variants[2]["plan"]["units"][0]["instances"][0]["argv"]
    for unit in variants[2]["plan"]["units"]:
        if unit["name"] == "agg":
            argv = unit["instances"][0]["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] == "16"
    assert argv[argv.index("--block-size") + 1] == "16"
    one = run(["dry-run", str(recipe), "--json", "--variant", "base"], found)
    assert one.code == 0, one.stderr
    assert json.loads(one.stdout)["job_name"] == "sweep"
    group = run(["dry-run", str(recipe), "--json", "--variant", "zip_override_tp"], found)
    assert [v["selector"] for v in json.loads(group.stdout)["variants"]] == [
        "zip_override_tp[0]",
        "zip_override_tp[1]",
    ]


def test_a_real_srtctl_sweep_dry_runs_per_variant(found: Any, tmp_path: Path) -> None:
    """recipes/b200-fp4/1k1k.yaml: eight zip variants, each a plan with its own workers."""
    recipe = data_dir() / "recipes" / "b200-fp4" / "1k1k.yaml"
    r = run(["dry-run", str(recipe), "--json"], found)
    assert r.code == 0, r.stderr
    variants = json.loads(r.stdout)["variants"]
    selectors = [v["selector"] for v in variants]
    assert len(selectors) == 8
    assert "zip_override_stp_lowlat[0]" in selectors and "base" not in selectors
    for v in variants:
        assert v["plan"]["job_name"] == v["variant"]
        workers = [
            i for u in v["plan"]["units"] if u["category"] == "workers" for i in u["instances"]
        ]
        assert workers and all(i["worker"] and i["gpus"] and i["argv"] for i in workers)
    one = run(["dry-run", str(recipe), "--json", "--variant", "zip_override_stp_lowlat[0]"], found)
    assert one.code == 0, one.stderr
    assert (
        json.loads(one.stdout)["job_name"]
        == variants[selectors.index("zip_override_stp_lowlat[0]")]["variant"]
    )


def test_apply_stages_one_job_per_variant(found: Any, tmp_path: Path) -> None:
    """``srt apply`` of a sweep file: one job per variant (as srtctl submits them), each in
    its own directory with its own script and recipe; ``--variant`` picks one."""
    recipe = data_dir() / "recipes" / "b200-fp4" / "1k1k.yaml"
    out = tmp_path / "jobs"
    r = run(["apply", str(recipe), "--dry-run", "--json", "-o", str(out)], found)
    assert r.code == 0, r.stderr
    subs = json.loads(r.stdout)
    names = json.loads(run(["dry-run", str(recipe), "--json"], found).stdout)["variants"]
    assert [Path(s["job_dir"]).name for s in subs] == [v["variant"] for v in names]
    assert len({s["script"] for s in subs}) == len(subs) == 8
    for sub in subs:
        assert Path(sub["job_dir"]).parent == out and sub["job_id"] is None
        assert Path(sub["script"]).is_file() and Path(sub["recipe"]).is_file()
        assert "#SBATCH" in Path(sub["script"]).read_text()
    one = run(
        ["apply", str(recipe), "--dry-run", "--json", "-o", str(tmp_path / "one"), "--variant",
         "zip_override_stp_lowlat[0]"],
        found,
    )  # fmt: skip
    assert one.code == 0, one.stderr
    picked = json.loads(one.stdout)
    assert isinstance(picked, dict) and picked["job_dir"] == str(tmp_path / "one")


CLUSTER = "model_paths:\n  tiny: {model}\ncontainers:\n  short: registry/image:1\n"


def test_the_cluster_config_beside_the_recipe_resolves_aliases(found: Any, tmp_path: Path) -> None:
    jobs = tmp_path / "recipes" / "mine"
    jobs.mkdir(parents=True)
    recipe = write(
        jobs, PLAIN.replace('"hf:Qwen/Qwen3-0.6B"', "tiny").replace("dynamo-sglang", "short")
    )
    (tmp_path / "srtslurm.yaml").write_text(CLUSTER.format(model="/models/tiny"))
    r = run(["dry-run", str(recipe), "--json"], found)
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)
    worker = next(u for u in plan["units"] if u["name"] == "agg")["instances"][0]
    assert worker["container"] == "registry/image:1"
    assert "/models/tiny:/model" in worker["mounts"]
    assert worker["argv"][worker["argv"].index("--model-path") + 1] == "/model"


def test_the_site_names_the_cluster_config(found: Any, tmp_path: Path) -> None:
    recipe = write(tmp_path, PLAIN.replace('"hf:Qwen/Qwen3-0.6B"', "tiny"))
    cluster = write(tmp_path / "..", CLUSTER.format(model="/m/site"), "site-cluster.yaml")
    site = write(tmp_path, f'[formats.srtctl]\ncluster_config = "{cluster}"\n', "site.toml")
    r = run(["dry-run", str(recipe), "--json"], found, SRT_SITE_CONFIG=str(site))
    assert r.code == 0, r.stderr
    assert "/m/site:/model" in json.dumps(json.loads(r.stdout))


def test_an_invalid_cluster_config_is_an_error(found: Any, tmp_path: Path) -> None:
    recipe = write(tmp_path, PLAIN)
    bad = write(tmp_path, "model_paths: {x: y}\nmodel_path: typo\n", "srtslurm.yaml")
    r = run(["validate", str(recipe)], found)
    assert r.code == 2
    assert f"invalid cluster config {bad}: model_path: Unknown field." in r.stderr, r.stderr
    r = run(["validate", str(recipe)], found, SRTSLURM_CONFIG=str(tmp_path / "none.yaml"))
    assert r.code == 2
    assert "no such srtslurm.yaml" in r.stderr, r.stderr


def test_migrate_writes_the_schema_2_translation_with_the_comments(
    found: Any, tmp_path: Path
) -> None:
    recipe = write(tmp_path, PLAIN)
    r = run(["migrate", "--from", "srtctl", str(recipe)], found)
    assert r.code == 0, r.stderr
    assert "# a small aggregated job" in r.stdout
    assert "# faster than real time" in r.stdout
    doc = yaml.safe_load(r.stdout)
    assert doc["schema"] == 2
    assert doc["engine"]["options"]["mocker"]["speedup_ratio"] == 50
    assert doc["roles"] == {"agg": {"workers": 1, "gpus_per_worker": 4, "nodes": 1}}
    migrated = write(tmp_path, r.stdout, "migrated.yaml")
    check = run(["validate", str(migrated)], found)
    assert check.code == 0, check.stderr


def test_a_migrated_recipe_plans_the_same_processes(found: Any, tmp_path: Path) -> None:
    """The written translation is a recipe srt accepts as it is (no srtctl format needed)."""
    source = data_dir() / "recipes" / "qwen3-32b" / "disagg-kv-dynamo.yaml"
    recipe = tmp_path / "r.yaml"
    shutil.copy(source, recipe)
    r = run(["migrate", "--from", "srtctl", str(recipe)], found)
    assert r.code == 0, r.stderr
    migrated = write(tmp_path, r.stdout, "migrated.yaml")
    before = run(["dry-run", str(recipe), "--json"], found)
    after = run(["dry-run", str(migrated), "--json"], found)
    assert before.code == after.code == 0, after.stderr

    def argvs(text: str) -> list[list[str]]:
        plan = json.loads(text)
        return [i["argv"] for u in plan["units"] for i in u["instances"]]

    assert argvs(after.stdout) == argvs(before.stdout)


def test_a_site_without_containers_runs_the_engines_installed_on_its_nodes(
    found: Any, tmp_path: Path
) -> None:
    """`[formats.srtctl] containers = false`: the model's own path, no container, no mounts,
    no Dynamo install (srtctl's `dynamo.version` would pip-install it before every process)."""
    recipe = write(
        tmp_path,
        PLAIN.replace('"hf:Qwen/Qwen3-0.6B"', "tiny").replace(
            "  install: false\n", '  version: "0.8.0"\n'
        ),
    )
    cluster = write(tmp_path, CLUSTER.format(model="/models/tiny"), "srtslurm.yaml")
    site = write(
        tmp_path, f'[formats.srtctl]\ncluster_config = "{cluster}"\ncontainers = false\n', "s.toml"
    )
    with_containers = run(["dry-run", str(recipe), "--json"], found)
    assert "ai-dynamo==0.8.0" in with_containers.stdout
    r = run(["dry-run", str(recipe), "--json"], found, SRT_SITE_CONFIG=str(site))
    assert r.code == 0, r.stderr
    worker = next(u for u in json.loads(r.stdout)["units"] if u["name"] == "agg")["instances"][0]
    assert worker["argv"][worker["argv"].index("--model-path") + 1] == "/models/tiny"
    assert worker["container"] is None and worker["mounts"] == []
    assert "ai-dynamo" not in r.stdout
    bad = write(tmp_path, "[formats.srtctl]\ncontainers = 0\n", "bad.toml")
    r = run(["validate", str(recipe)], found, SRT_SITE_CONFIG=str(bad))
    assert r.code == 2
    assert "[formats.srtctl] containers must be true or false" in r.stderr, r.stderr


def test_a_dedicated_infra_node_holds_etcd_and_nats(found: Any, tmp_path: Path) -> None:
    """`infra.etcd_nats_dedicated_node`: etcd and NATS (a NATS plane) on a node of their own,
    their problems located at `infra:`."""
    recipe = write(
        tmp_path,
        PLAIN.replace("  install: false\n", "  install: false\n  request_plane: nats\n")
        + "infra:\n  etcd_nats_dedicated_node: true\n  nats_max_payload_mb: 64\n",
    )
    checked = run(["validate", str(recipe)], found)
    assert checked.code == 0, checked.stderr
    assert f"{recipe}:23:1: services[nats].options.max_payload_mb" in checked.stderr
    r = run(["dry-run", str(recipe), "--json"], found)
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert len(plan["nodes"]) == 2
    where = {u["name"]: [i["node"] for i in u["instances"]] for u in plan["units"]}
    assert where["etcd"] == where["nats"] == ["node0"]
    assert where["agg"] == ["node1"]


def test_mooncake_kv_store_becomes_a_mooncake_master_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As `srt migrate` rewrites a v1 recipe: the master entry (container, extra args,
    store config), its env in every role's env, and its origin at `backend.mooncake_kv_store`."""
    from srt_srtctl.recipe_format import SrtctlFormat

    monkeypatch.setenv("SRTSLURM_CONFIG", "")
    data = yaml.safe_load(PLAIN)
    data["backend"] = {
        "type": "sglang",
        "mooncake_kv_store": {
            "container": "mc:1",
            "env": {"MC_X": "1"},
            "master_extra_args": "--eviction-ratio 0.1",
            "store_config": {"global_segment_size": 1},
        },
    }
    fmt = SrtctlFormat()
    (variant,) = fmt.variants(data, "<stdin>", {})
    out = fmt.translate(data, variant, "<stdin>", {})
    master = out.data["services"][-1]
    assert master == {
        "name": "mooncake-master",
        "type": "mooncake-master",
        "container": "mc:1",
        "args": ["--eviction-ratio", "0.1"],
        "options": {"store_config": {"global_segment_size": 1}},
    }
    assert out.data["roles"]["agg"]["env"]["MC_X"] == "1"
    index = len(out.data["services"]) - 1
    assert out.origin(("services", index, "args")) == ("backend", "mooncake_kv_store")


def test_a_problem_srt_finds_in_the_translation_is_at_the_srtctl_key(
    found: Any, tmp_path: Path
) -> None:
    """srtctl's schema takes `gpus_per_node: 0`; srt's check of the translated recipe refuses
    it, at the line of the key the user wrote."""
    recipe = write(tmp_path, PLAIN.replace("gpus_per_node: 4", "gpus_per_node: 0"))
    r = run(["validate", str(recipe)], found)
    assert r.code == 2
    assert f"{recipe}:9:3: resources.gpus_per_node: must be at least 1, got 0" in r.stderr
    assert f"{recipe}:9:3: roles.agg.gpus_per_worker" in r.stderr, r.stderr
