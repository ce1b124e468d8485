"""What the gms kind makes of a recipe: one instance per worker, its devices and directory,
what the workers are told, the probe, and every load-time rule. Pure: nothing starts, so
no stand-in is needed here."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_gms.kind import supervisor_source
from srt_services.extend import Plan, PlannedUnit
from srt_services.testing import LoadedRecipe, RecipeError

MakePlan = Callable[..., Plan]
Load = Callable[..., LoadedRecipe]

#: node0: prefill_0 (GPUs 0-1) and prefill_1 (GPUs 2-3); node1-node2: decode_0 (8 GPUs).
JOB = """\
schema: 2
name: g
resources: {gpus_per_node: 4}
engine: {type: vllm, failover: true}
observability: {metrics: false}
frontend: {type: vllm, command: [f]}
roles:
  prefill: {workers: 2, gpus_per_worker: 2, command: [w]}
  decode: {workers: 1, gpus_per_worker: 8, command: [w]}
"""


def unit(plan: Plan, name: str) -> PlannedUnit:
    return next(u for u in plan.units if u.name == name)


def errors(load: Load, text: str) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(text)
    return [p.render("recipe.yaml") for p in info.value.errors]


# --------------------------------------------------------------------------- implied


def test_failover_implies_one_gms_per_worker_and_node(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB)
    u = unit(p, "gms")
    assert (u.implied_by, u.placement, u.per, u.phase, u.critical, u.type) == (
        "engine.failover", "workers", "worker", "before_workers", True, "gms",
    )  # fmt: skip
    assert [(i.step, i.node, i.worker, i.gpus) for i in u.instances] == [
        ("service_gms_prefill_0_node0", "node0", "prefill_0", [0, 1]),
        ("service_gms_prefill_1_node0", "node0", "prefill_1", [2, 3]),
        ("service_gms_decode_0_node1", "node1", "decode_0", [0, 1, 2, 3]),
        ("service_gms_decode_0_node2", "node2", "decode_0", [0, 1, 2, 3]),
    ]
    # it starts before the workers it serves
    assert list(p.phases).index("before_workers") < list(p.phases).index("workers")


def test_no_failover_no_gms(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB.replace("failover: true", "failover: false"))
    assert not any(u.name == "gms" for u in p.units)


def test_declared_by_name_or_type_replaces_it_and_enabled_false_drops_it(
    srt_plan: MakePlan,
) -> None:
    by_name = srt_plan(JOB + "services:\n  - {name: gms, args: [--verbose]}\n")
    assert unit(by_name, "gms").replaces_implied == "engine.failover"
    by_type = srt_plan(
        JOB + "services:\n  - {name: memsvc, type: gms, placement: {node: decode}}\n"
    )
    assert [u.name for u in by_type.units if u.category == "service"] == ["memsvc"]
    off = srt_plan(JOB + "services:\n  - {name: gms, enabled: false}\n")
    assert not any(u.category == "service" for u in off.units)


# --------------------------------------------------------------------------- one instance


def test_argv_one_server_per_gpu_of_the_worker(srt_plan: MakePlan) -> None:
    u = unit(srt_plan(JOB + "services:\n  - {name: gms, args: [--verbose]}\n"), "gms")
    first = u.instances[0]
    work = "/jobs/j/work/service_gms_prefill_0_node0"
    assert first.argv[:2] == ["python3", f"{work}/gms_supervisor.py"]
    flags = dict(zip(first.argv[2:-2:2], first.argv[3:-2:2], strict=True))
    assert flags["--devices"] == "2"  # the worker's two GPUs: --device 0 and --device 1
    assert flags["--timeout"] == "120"
    assert flags["--sockets-per-device"] == "2"
    assert (flags["--python"], flags["--module"]) == ("python3", "gpu_memory_service")
    assert first.argv[-2:] == ["--", "--verbose"]  # each server gets the recipe's args
    assert flags["--dir"].endswith("/gms/prefill_0")
    assert flags["--dir"].startswith("/tmp/srt-")  # the job's node-local directory
    # the decode worker is whole nodes wide: all of a node's GPUs, a directory per node
    wide = u.instances[2]
    wide_flags = dict(zip(wide.argv[2:-2:2], wide.argv[3:-2:2], strict=True))
    assert wide_flags["--devices"] == "4"
    assert wide_flags["--dir"].endswith("/gms/decode_0_node1")


def test_the_device_view_and_the_directory_in_the_environment(srt_plan: MakePlan) -> None:
    u = unit(srt_plan(JOB), "gms")
    envs = {i.step: i.env for i in u.instances}
    assert envs["service_gms_prefill_1_node0"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in envs["service_gms_decode_0_node1"]  # whole node
    for inst in u.instances:
        assert (
            inst.env["GMS_SOCKET_DIR"]
            == dict(zip(inst.argv[2::2], inst.argv[3::2], strict=False))["--dir"]
        )


def test_the_supervisor_is_written_verbatim_into_the_work_dir(srt_plan: MakePlan) -> None:
    (first, *_) = unit(srt_plan(JOB), "gms").instances
    assert list(first.files) == ["gms_supervisor.py"]
    written = first.files["gms_supervisor.py"]
    # the placeholders srt renders in files must not eat the supervisor's f-strings
    assert 'f"GMS ready: {args.devices} device(s), {have} sockets in {directory}"' in written
    ast.parse(written)
    assert "{{" not in written  # what supervisor_source escaped came back unescaped
    assert "{{directory}}" in supervisor_source()


def test_readiness_is_the_ready_line_and_bounds_start_up(srt_plan: MakePlan) -> None:
    inst = unit(srt_plan(JOB), "gms").instances[0]
    probe = inst.readiness
    assert probe is not None
    assert (probe.probe, probe.config["pattern"]) == ("log", r"GMS\ ready:")
    assert probe.timeout == 150.0  # the supervisor's 120 s, then srt's own 30 s slack
    written = srt_plan(
        JOB + "services:\n  - name: gms\n"
        "    readiness: {log: {pattern: 'GMS ready:'}, timeout_seconds: 600}\n"
    )
    inst = unit(written, "gms").instances[0]
    # the supervisor gives up a little earlier, so its message is the one the user reads
    assert inst.argv[inst.argv.index("--timeout") + 1] == "595"
    assert inst.readiness is not None and inst.readiness.timeout == 600.0


def test_options_python_module_sockets(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "services:\n  - name: gms\n    options: {python: /opt/py/bin/python,"
        " module: dynamo.gpu_memory_service, sockets_per_device: 1}\n"
    )
    argv = unit(p, "gms").instances[0].argv
    assert argv[0] == "/opt/py/bin/python"
    assert argv[argv.index("--module") + 1] == "dynamo.gpu_memory_service"
    assert argv[argv.index("--python") + 1] == "/opt/py/bin/python"
    assert argv[argv.index("--sockets-per-device") + 1] == "1"


# --------------------------------------------------------------------------- the workers


def test_each_worker_is_told_its_own_directory_and_lock(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB)
    gms = {
        i.worker + ("_" + i.node if i.worker == "decode_0" else ""): i
        for i in unit(p, "gms").instances
    }
    for role in ("prefill", "decode"):
        for inst in unit(p, role).instances:
            key = inst.step
            served = gms[key]
            assert inst.env["GMS_SOCKET_DIR"] == served.env["GMS_SOCKET_DIR"], key
            assert inst.env["FAILOVER_LOCK_PATH"] == served.env["GMS_SOCKET_DIR"] + "/failover.lock"
    assert (
        unit(p, "prefill").instances[0].env["GMS_SOCKET_DIR"]
        != (unit(p, "prefill").instances[1].env["GMS_SOCKET_DIR"])
    )


def test_a_gms_for_one_role_tells_only_that_role(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + "services:\n  - {name: gms, placement: {node: decode}}\n")
    assert [i.worker for i in unit(p, "gms").instances] == ["decode_0", "decode_0"]
    assert "GMS_SOCKET_DIR" in unit(p, "decode").instances[0].env
    assert "GMS_SOCKET_DIR" not in unit(p, "prefill").instances[0].env


def test_the_workers_own_env_wins(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB.replace("command: [w]}", "command: [w], env: {FAILOVER_LOCK_PATH: /x}}", 1))
    assert unit(p, "prefill").instances[0].env["FAILOVER_LOCK_PATH"] == "/x"


# --------------------------------------------------------------------------- validation


def test_per_node_is_refused(srt_load: Load) -> None:
    (e,) = errors(
        srt_load, JOB + "services:\n  - {name: gms, placement: {node: decode, per: node}}\n"
    )
    assert e == (
        "recipe.yaml:11:43: services[gms].placement.per: type 'gms' runs one instance per worker"
        " in that worker's device view; set placement.per: worker"
    )


def test_gms_without_failover_is_refused(srt_load: Load) -> None:
    (e,) = errors(
        srt_load,
        JOB.replace("failover: true", "failover: false")
        + "services:\n  - {name: mem, type: gms}\n",
    )
    assert "services[mem].type: type 'gms' needs engine.failover: true" in e


def test_a_placement_without_workers_is_refused(srt_load: Load) -> None:
    (e,) = errors(srt_load, JOB + "services:\n  - {name: gms, placement: {node: head}}\n")
    assert "per: worker needs a placement that selects workers" in e


def test_a_command_is_refused(srt_load: Load) -> None:
    (e,) = errors(srt_load, JOB + "services:\n  - {name: gms, command: [bash, -c, x]}\n")
    assert "services[gms].command: type 'gms' builds its own command" in e


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{module: 'gms; rm'}", "options.module: must be a module name"),
        ("{python: ' '}", "options.python: must not be blank"),
        ("{sockets_per_device: 0}", "options.sockets_per_device: must be at least 1, got 0"),
    ],
)
def test_bad_options(srt_load: Load, options: str, message: str) -> None:
    (e,) = errors(srt_load, JOB + f"services:\n  - {{name: gms, options: {options}}}\n")
    assert message in e


def test_two_memory_services_for_the_same_workers_are_refused(srt_load: Load) -> None:
    text = JOB + (
        "services:\n"
        "  - {name: gms-decode, type: gms, placement: {node: decode}}\n"
        "  - {name: gms-again, type: gms, placement: {node: decode}}\n"
    )
    (e,) = errors(srt_load, text)
    assert e.startswith("recipe.yaml:12:")
    assert "services[gms-decode] already runs GMS for these workers (decode)" in e


def test_one_per_role_is_fine(srt_plan: MakePlan) -> None:
    text = JOB + (
        "services:\n"
        "  - {name: gms-decode, type: gms, placement: {node: decode}}\n"
        "  - {name: gms-prefill, type: gms, placement: {node: prefill}}\n"
    )
    p = srt_plan(text)
    assert len(unit(p, "gms-decode").instances) == 2
    assert len(unit(p, "gms-prefill").instances) == 2


def test_the_example_plans(srt_load: Load, srt_plan: MakePlan) -> None:
    """examples/gms-failover.yaml (GPU nodes: dry-run only here) plans what it says."""
    path = Path(__file__).resolve().parents[3] / "examples" / "gms-failover.yaml"
    source = "examples/gms-failover.yaml"
    assert srt_load(path.read_text(), source).warnings == []
    p = srt_plan(path.read_text(), local=False, job_dir="<job_dir>", source=source)
    u = unit(p, "gms")
    assert u.replaces_implied == "engine.failover"
    assert [(i.step, i.gpus) for i in u.instances] == [
        ("service_gms_decode_0_node0", [0, 1, 2, 3]),
        ("service_gms_decode_1_node0", [4, 5, 6, 7]),
    ]
    argv = u.instances[1].argv
    assert argv[argv.index("--devices") + 1] == "4"
    assert argv[argv.index("--timeout") + 1] == "595"
