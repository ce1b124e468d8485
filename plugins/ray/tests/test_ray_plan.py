"""What the ray kind makes of a recipe: the head's and the members' `ray start`, their
environment, readiness per role and per fleet, what consumers and the benchmark are told,
and the recipes it refuses. Pure: plans are resolved in-process; nothing starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from srt_ray.kind import TEMP_DIR_MAX
from srt_services.extend import Plan

MakePlan = Callable[..., Plan]
Errors = Callable[..., list[str]]

POOL = {"name": "train", "type": "ray", "nodes": 3}


def test_the_first_instance_is_the_head_and_the_others_join_it(plan: MakePlan) -> None:
    p = plan([POOL], local=True)
    head, *members = p.unit("train").instances
    assert [i.index for i in (head, *members)] == [0, 1, 2]
    assert head.argv == [
        "ray", "start", "--head", "--block",
        "--port=6379",
        f"--dashboard-host={head.node_ip}",
        "--dashboard-port=8265",
        "--include-dashboard=true",
        f"--node-ip-address={head.node_ip}",
        "--num-gpus=4",
        f"--temp-dir={p.local_dir}/{head.step}",
        "--disable-usage-stats",
    ]  # fmt: skip
    for m in members:
        assert m.argv == [
            "ray", "start", "--block",
            f"--address={head.node_ip}:6379",
            f"--node-ip-address={m.node_ip}",
            "--num-gpus=4",
            f"--temp-dir={p.local_dir}/{m.step}",
            "--disable-usage-stats",
        ]  # fmt: skip
    assert "0.0.0.0" not in " ".join(head.argv), "the dashboard binds the node's address"


def test_a_member_waits_for_the_heads_gcs_port_before_it_starts(plan: MakePlan) -> None:
    p = plan([POOL], local=True)
    head, member, _ = p.unit("train").instances
    assert member.preamble is not None
    assert f"/dev/tcp/{head.node_ip}/6379" in member.preamble
    assert member.preamble.index("mkdir -p") < member.preamble.index("/dev/tcp")
    assert head.preamble is not None and "/dev/tcp" not in head.preamble
    # both check for the binary first, with the install hint
    for inst in (head, member):
        assert "pip install 'ray[default]'" in inst.preamble


def test_options_and_args_reach_every_ray_start(plan: MakePlan) -> None:
    entry = {
        **POOL,
        "options": {"port": 7000, "dashboard_port": 9265, "num_gpus": 2, "num_cpus": 16},
        "args": ["--object-store-memory=1000000000"],
    }
    head, member, _ = plan([entry]).unit("train").instances
    assert "--port=7000" in head.argv and "--dashboard-port=9265" in head.argv
    assert member.argv[3] == f"--address={head.node_ip}:7000"
    for inst in (head, member):
        assert "--num-gpus=2" in inst.argv and "--num-cpus=16" in inst.argv
        assert inst.argv[-1] == "--object-store-memory=1000000000"
        assert inst.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert head.ports == [7000, 9265]


def test_environment_defaults_the_recipe_may_override_and_usage_stats_always_off(
    plan: MakePlan,
) -> None:
    p = plan([POOL])
    for inst in p.unit("train").instances:
        assert inst.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
        assert inst.env["RAY_memory_monitor_refresh_ms"] == "0"
        assert inst.env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"
        assert inst.env["RAY_USAGE_STATS_ENABLED"] == "0"
    env = {
        "CUDA_VISIBLE_DEVICES": "1",
        "RAY_memory_monitor_refresh_ms": "250",
        "RAY_USAGE_STATS_ENABLED": "1",
    }
    p = plan([{**POOL, "env": env}])
    u = p.unit("train")
    for inst in u.instances:
        assert inst.env["CUDA_VISIBLE_DEVICES"] == "1"
        assert inst.env["RAY_memory_monitor_refresh_ms"] == "250"
        assert inst.env["RAY_USAGE_STATS_ENABLED"] == "0", "telemetry stays off"
    assert any("RAY_USAGE_STATS_ENABLED" in w for w in u.warnings)


def test_no_gpus_hides_every_device(plan: MakePlan) -> None:
    (inst,) = plan([{**POOL, "nodes": 1, "options": {"num_gpus": 0}}]).unit("train").instances
    assert "--num-gpus=0" in inst.argv
    assert inst.env["CUDA_VISIBLE_DEVICES"] == ""


def test_readiness_per_role_then_the_fleet_gate_over_every_member(plan: MakePlan) -> None:
    p = plan([POOL], local=True)
    u = p.unit("train")
    head, *members = u.instances
    assert head.readiness is not None and head.readiness.probe == "http"
    assert head.readiness.config["url"] == f"http://{head.node_ip}:8265/api/version"
    assert head.readiness.config["status"] == 200
    for m in members:
        assert m.readiness is not None and m.readiness.probe == "log"
        assert m.readiness.describe == r"log matches /Ray\ runtime\ started/"
    fleet = u.fleet
    assert fleet is not None and fleet.probe == "ray-fleet"
    assert fleet.config["url"] == f"http://{head.node_ip}:8265/api/v0/nodes?limit=10000"
    assert fleet.config["members"] == [{"node": i.node, "ip": i.node_ip} for i in u.instances]
    # and the head's own ray start has finished starting (a stop then takes seconds)
    assert fleet.config["started"] == r"Ray\ runtime\ started"
    assert fleet.describe.startswith(r"log matches /Ray\ runtime\ started/ and 3 Ray node(s)")
    assert (fleet.timeout, fleet.interval) == (600.0, 0.5)
    assert (u.phase, u.critical, u.placement) == ("before_workers", True, "workers")


def test_a_written_readiness_sets_the_gates_timing_too(plan: MakePlan) -> None:
    entry = {
        **POOL,
        "readiness": {"log": {"pattern": "Ray runtime started"}, "timeout_seconds": 45},
    }
    u = plan([entry]).unit("train")
    assert all(i.readiness is not None and i.readiness.probe == "log" for i in u.instances)
    assert u.fleet is not None and u.fleet.timeout == 45


def test_consumers_get_the_gcs_address_and_the_job_api_url(plan: MakePlan) -> None:
    p = plan(
        [
            POOL,
            {
                "name": "envsrv",
                "command": ["python3", "-m", "envsrv"],
                "placement": {"pool": "train"},
            },
        ],
        benchmark={"type": "command", "command": ["python3", "bench.py"]},
        local=True,
    )
    head_ip = p.unit("train").instances[0].node_ip
    assert p.discovery_env == {
        "RAY_ADDRESS": f"{head_ip}:6379",
        "RAY_API_SERVER_ADDRESS": f"http://{head_ip}:8265",
    }
    for inst in p.unit("envsrv").instances:
        assert inst.env["RAY_ADDRESS"] == f"{head_ip}:6379"
    (bench,) = p.unit("benchmark").instances
    assert bench.env["RAY_API_SERVER_ADDRESS"] == f"http://{head_ip}:8265"
    assert bench.env["SRT_SERVICE_TRAIN_ADDRESS"] == f"{head_ip}:6379"
    assert bench.env["SRT_SERVICE_TRAIN_DASHBOARD_URL"] == f"http://{head_ip}:8265"
    assert bench.env["SRT_SERVICE_TRAIN_NODE_COUNT"] == "3"


def test_the_metrics_list_form_scrapes_the_head_only_for_nodes_first(plan: MakePlan) -> None:
    entry = {
        **POOL,
        "nodes": 2,
        "metrics": [
            {"name": "miles", "port": 9090, "nodes": "first"},
            {"name": "engines", "port": 31000, "path": "/engine_metrics", "nodes": "first"},
            {"name": "raylets", "port": 8080},
        ],
    }
    p = plan([entry], local=True)
    head, member = p.unit("train").instances
    targets = {t.name: (t.url, t.service) for t in p.scrape_targets}
    assert targets == {
        f"miles_{head.node}": (f"http://{head.node_ip}:9090/metrics", "train"),
        f"engines_{head.node}": (f"http://{head.node_ip}:31000/engine_metrics", "train"),
        f"raylets_{head.node}": (f"http://{head.node_ip}:8080/metrics", "train"),
        f"raylets_{member.node}": (f"http://{member.node_ip}:8080/metrics", "train"),
    }
    assert 9090 in head.ports and 9090 not in member.ports


@pytest.mark.parametrize(
    ("placement", "count"),
    [({"node": "head"}, 1), ({"node": "workers"}, 2), ({"node": "all"}, 4), ({"pool": "gpu"}, 2)],
)
def test_placements(plan: MakePlan, placement: dict[str, str], count: int) -> None:
    p = plan(
        [
            {"name": "gpu", "nodes": 2, "command": ["sleep", "1000"]},
            {"name": "rl", "type": "ray", "placement": placement},
        ],
        roles={"agg": {"workers": 2, "command": ["python3", "-m", "w"]}},
        frontend={"type": "sglang", "command": ["python3", "-m", "f"]},
    )
    u = p.unit("rl")
    assert len(u.instances) == count
    assert u.instances[0].argv[2] == "--head"
    assert u.fleet is not None and len(u.fleet.config["members"]) == count


def test_a_long_local_dir_gets_a_short_temp_dir_for_rays_socket_paths(plan: MakePlan) -> None:
    name = "rollout-cluster-with-a-rather-long-name"
    p = plan([{**POOL, "name": name}])
    for inst in p.unit(name).instances:
        tmp = next(a for a in inst.argv if a.startswith("--temp-dir="))[len("--temp-dir=") :]
        assert len(tmp) <= TEMP_DIR_MAX
        assert tmp.startswith(f"{p.local_dir}/ray-"), "still removed with the job's tree"
    dirs = [next(a for a in i.argv if a.startswith("--temp-dir=")) for i in p.unit(name).instances]
    assert len(set(dirs)) == 3


# --------------------------------------------------------------------------- refused


def _one(found: list[str], *needles: str) -> str:
    text = "\n".join(found)
    assert found, "expected the recipe to be refused"
    for needle in needles:
        assert needle in text, text
    return text


def test_command_is_refused(errors: Errors) -> None:
    _one(
        errors([{**POOL, "command": ["ray", "start", "--head"]}]),
        "services[train].command",
        "type 'ray' builds its own command; use args or options",
    )


def test_a_role_slice_is_refused(errors: Errors) -> None:
    _one(
        errors(
            [{"name": "r", "type": "ray", "placement": {"node": "decode"}}],
            roles={"decode": {"workers": 1, "command": ["x"]}},
            frontend={"type": "sglang", "command": ["f"]},
        ),
        "services[r].placement.node",
        "type 'ray' must be placed on all, head, pool, workers; got 'decode'",
    )
    _one(
        errors(
            [{"name": "r", "type": "ray", "placement": {"node": "workers", "per": "worker"}}],
            roles={"decode": {"workers": 1, "command": ["x"]}},
            frontend={"type": "sglang", "command": ["f"]},
        ),
        "services[r].placement.per",
        "Ray owns whole nodes",
    )


@pytest.mark.parametrize(
    ("options", "where", "message"),
    [
        ({"num_gpus": 5}, "options.num_gpus", "is 5 but a node has 4 GPUs"),
        ({"num_gpus": -1}, "options.num_gpus", "must be at least 0, got -1"),
        ({"num_cpus": 0}, "options.num_cpus", "must be at least 1, got 0"),
        ({"port": 12000}, "options.port", "12000 lies in the range ray start gives its worker"),
        ({"dashboard_port": 6379}, "options.dashboard_port", "must differ from port (6379)"),
        ({"port": "6379"}, "options.port", ""),
        ({"gcs": 1}, "options.gcs", "type 'ray' does not understand this option"),
    ],
)
def test_bad_options(errors: Errors, options: dict[str, Any], where: str, message: str) -> None:
    _one(errors([{**POOL, "options": options}]), f"services[train].{where}", message)


def test_the_worker_port_range_may_be_moved_with_args(errors: Errors) -> None:
    entry = {
        **POOL,
        "options": {"port": 12000},
        "args": ["--min-worker-port=20000", "--max-worker-port=29999"],
    }
    assert errors([entry]) == []


@pytest.mark.parametrize(
    ("arg", "hint"),
    [
        ("--head", "srt writes it for every node"),
        ("--address=10.0.0.1:6379", "srt writes it"),
        ("--num-gpus=2", "use options.num_gpus"),
        ("--dashboard-port=1", "use options.dashboard_port"),
        ("--temp-dir=/scratch", "srt writes it"),
    ],
)
def test_flags_srt_owns_are_refused_in_args(errors: Errors, arg: str, hint: str) -> None:
    _one(
        errors([{**POOL, "args": ["--resources={}", arg]}]),
        "services[train].args[1]",
        f"{arg.split('=', maxsplit=1)[0]} is set by type 'ray'; {hint}",
    )


def test_two_clusters_are_allowed_with_a_warning_naming_the_env_that_tells_them_apart(
    plan: MakePlan,
) -> None:
    p = plan(
        [
            {"name": "train", "type": "ray", "nodes": 2},
            {
                "name": "roll-out",
                "type": "ray",
                "nodes": 2,
                "options": {"port": 6380, "dashboard_port": 8266},
            },
        ],
        benchmark={"type": "command", "command": ["b"]},
    )
    (bench,) = p.unit("benchmark").instances
    assert bench.env["RAY_ADDRESS"].endswith(":6380")
    assert bench.env["SRT_SERVICE_TRAIN_ADDRESS"].endswith(":6379")
    assert bench.env["SRT_SERVICE_ROLL_OUT_ADDRESS"].endswith(":6380")


def test_two_clusters_warning_text(srt_load: Callable[..., Any]) -> None:
    loaded = srt_load(
        {
            "frontend": {"type": "none"},
            "services": [
                {"name": "train", "type": "ray", "nodes": 1},
                {
                    "name": "rollout",
                    "type": "ray",
                    "nodes": 1,
                    "options": {"port": 6380, "dashboard_port": 8266},
                },
            ],
        },
    )
    text = "\n".join(w.render("kit.yaml") for w in loaded.warnings)
    assert "services[0].type" in text or "services[train].type" in text, text
    assert (
        "a second Ray cluster: RAY_ADDRESS and RAY_API_SERVER_ADDRESS name services[rollout]"
        in text
    )
    assert "SRT_SERVICE_TRAIN_ADDRESS" in text
