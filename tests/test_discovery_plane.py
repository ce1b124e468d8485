"""The discovery plane end to end: srt-etcd and srt-nats together, as a Dynamo job uses them.

The runtime test runs real etcd and nats-server under `srt run`; its worker and benchmark
are this very file run as a script (``python test_discovery_plane.py worker|check|env``), so
the client side lives next to the assertions about it. The rest is pure: the shared rules
(dedicated agreement, node counts, external, who gets which variable) on resolved plans.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "discovery-local.yaml"
KEY = "srt/discovery/agg_0"
SUBJECT = "srt.discovery.ping"


# --------------------------------------------------------------------------- job processes
# What the worker, the benchmark and the sidecars run. Standard library for etcd (its HTTP
# gateway), nats-py for NATS: what a Dynamo process sees is ETCD_ENDPOINTS and NATS_SERVER.


def _etcd(path: str, body: dict[str, str]) -> dict[str, Any]:
    base = os.environ["ETCD_ENDPOINTS"].split(",")[0]
    request = urllib.request.Request(
        base + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        data: dict[str, Any] = json.load(response)
        return data


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def etcd_put(key: str, value: str) -> None:
    _etcd("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})


def etcd_get(key: str) -> str | None:
    kvs = _etcd("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


async def worker() -> int:
    """Register in etcd, answer on NATS, say so, then serve until stopped."""
    import nats

    me = f"agg_0@{os.environ['SRT_NODE_IP']}"
    etcd_put(KEY, me)
    if etcd_get(KEY) != me:
        print("etcd read-back differs", flush=True)
        return 1
    nc = await nats.connect(os.environ["NATS_SERVER"], connect_timeout=5, max_reconnect_attempts=0)
    echoed: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def echo(msg: Any) -> None:
        if not echoed.done():
            echoed.set_result(msg.data)

    async def pong(msg: Any) -> None:
        await msg.respond(b"pong from " + me.encode() + b": " + msg.data)

    await nc.subscribe("srt.discovery.self", cb=echo)
    await nc.subscribe(SUBJECT, cb=pong)
    await nc.publish("srt.discovery.self", b"hello")
    assert await asyncio.wait_for(echoed, 5) == b"hello"
    print(
        f"discovery worker ready: etcd {os.environ['ETCD_ENDPOINTS']} has {KEY}={me};"
        f" nats {os.environ['NATS_SERVER']} pub/sub ok",
        flush=True,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await nc.drain()
    return 0


async def check() -> int:
    """The benchmark: find the worker the way a frontend would, then talk to it."""
    import nats

    registered = etcd_get(KEY)
    print(f"etcd {KEY} = {registered}", flush=True)
    nc = await nats.connect(os.environ["NATS_SERVER"], connect_timeout=5, max_reconnect_attempts=0)
    reply = await nc.request(SUBJECT, b"ping", timeout=5)
    print(f"nats reply: {reply.data.decode()}", flush=True)
    await nc.close()
    ok = registered is not None and reply.data.decode() == f"pong from {registered}: ping"
    return 0 if ok else 1


def show_env() -> int:
    shown = {k: os.environ.get(k, "-") for k in ("ETCD_ENDPOINTS", "NATS_SERVER")}
    print("discovery env " + json.dumps(shown, sort_keys=True), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def main(argv: list[str]) -> int:
    if argv == ["worker"]:
        return asyncio.run(worker())
    if argv == ["check"]:
        return asyncio.run(check())
    if argv == ["env"]:
        return show_env()
    print(f"usage: {sys.argv[0]} worker|check|env", file=sys.stderr)
    return 2


if __name__ == "__main__":
    # Run as a job process: exit before importing pytest and srt, which it does not need
    # and which would add most of a second to every worker start.
    sys.exit(main(sys.argv[1:]))

import pytest  # noqa: E402 - after the script entry point on purpose (see above)

# a port the kernel just handed out: parallel sessions keep 2379/4222 for themselves
from srt_services.testing.jobs import free_port  # noqa: E402

# --------------------------------------------------------------------------- test helpers


def plugin_set() -> Any:
    """Core plus the two plugins under test and nothing else that happens to be installed."""
    import srt_etcd.plugin
    import srt_nats.plugin
    from srt_services.testing import kit

    ps = kit.isolated_plugins(srt_etcd.plugin, "srt-etcd")
    ps.register(srt_nats.plugin, name="srt-nats")
    return ps


def load(text: str) -> Any:
    from srt_services.testing import kit

    return kit.load(plugin_set(), text, "recipe.yaml")


def plan(text: str, local: bool = False) -> Any:
    from srt_services.testing import kit

    return kit.plan(plugin_set(), text, local=local, source="recipe.yaml")


def unit(p: Any, name: str) -> Any:
    return next(u for u in p.units if u.name == name)


def errors_of(text: str) -> list[str]:
    from srt_services.recipe.problems import RecipeError

    with pytest.raises(RecipeError) as info:
        load(text)
    return [e.render("recipe.yaml") for e in info.value.errors]


DYNAMO = """\
schema: 2
name: plane
resources: {gpus_per_node: 1}
frontend: {type: dynamo, command: [sleep, "1"]}
dynamo: {request_plane: nats}
roles:
  agg: {workers: 1, command: [sleep, "1"]}
"""


# --------------------------------------------------------------------------- runtime


needs_servers = pytest.mark.skipif(
    shutil.which("etcd") is None or shutil.which("nats-server") is None,
    reason="needs etcd and nats-server (apt-get install etcd-server nats-server)",
)


@pytest.mark.component
@needs_servers
def test_a_dynamo_style_job_finds_itself_through_etcd_and_nats(tmp_path: Path) -> None:
    from srt_services.testing.jobs import run_recipe
    from srt_services.testing.survivors import assert_no_survivors

    me = [sys.executable, str(Path(__file__).resolve())]
    ports = {k: free_port() for k in ("client", "peer", "nats", "monitor")}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "schema: 2\n"
        "name: plane\n"
        "observability: {metrics: false}\n"
        "resources: {gpus_per_node: 1}\n"
        'frontend: {type: dynamo, command: [sleep, "600"]}\n'
        "dynamo: {request_plane: nats}\n"
        "roles:\n"
        "  agg:\n"
        f"    command: {json.dumps([*me, 'worker'])}\n"
        "    readiness: {log: {pattern: 'discovery worker ready'}, timeout_seconds: 30}\n"
        f"benchmark: {{type: command, command: {json.dumps([*me, 'check'])}}}\n"
        "services:\n"
        # the implied etcd and nats, taken over by name only to move them off 2379/4222
        f"  - {{name: etcd, type: etcd, options: {{client_port: {ports['client']},"
        f" peer_port: {ports['peer']}}}}}\n"
        f"  - {{name: nats, type: nats, options: {{port: {ports['nats']},"
        f" monitor_port: {ports['monitor']}, max_payload_mb: 2}}}}\n"
        f"  - name: told\n    command: {json.dumps([*me, 'env'])}\n"
        "    readiness: {log: {pattern: 'discovery env'}}\n"
        f"  - name: untold\n    command: {json.dumps([*me, 'env'])}\n"
        "    inherit_discovery_env: false\n"
        "    readiness: {log: {pattern: 'discovery env'}}\n"
    )
    job_dir = str(tmp_path / "job")
    job = run_recipe(str(recipe), job_dir, timeout=60)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert job.result()["cause"]["kind"] == "benchmark_exit"
        etcd_url = f"http://127.0.0.1:{ports['client']}"
        nats_url = f"nats://127.0.0.1:{ports['nats']}"

        events = job.events()
        seen = [(e["event"], e.get("step") or e.get("phase")) for e in events]
        assert ("phase_ready", "infra") in seen
        for step in ("service_etcd", "service_nats"):
            assert seen.index(("ready", step)) < seen.index(("launched", "agg_0"))
        infra = next(e for e in events if e["event"] == "phase_started" and e["phase"] == "infra")
        assert sorted(infra["units"]) == ["etcd", "nats"]

        assert f"etcd {etcd_url} has {KEY}=agg_0@127.0.0.1; nats {nats_url} pub/sub ok" in (
            job.log("agg_0")
        )
        bench = job.log("benchmark")
        assert f"etcd {KEY} = agg_0@127.0.0.1" in bench
        assert "nats reply: pong from agg_0@127.0.0.1: ping" in bench

        told = json.dumps({"ETCD_ENDPOINTS": etcd_url, "NATS_SERVER": nats_url}, sort_keys=True)
        assert f"discovery env {told}" in job.log("service_told")
        untold = json.dumps({"ETCD_ENDPOINTS": "-", "NATS_SERVER": "-"}, sort_keys=True)
        assert f"discovery env {untold}" in job.log("service_untold")

        with open(os.path.join(job_dir, "plan.json"), "rb") as fh:
            planned = {u["name"]: u for u in json.load(fh)["units"]}
        for plane in ("etcd", "nats"):
            (inst,) = planned[plane]["instances"]
            assert not {"ETCD_ENDPOINTS", "NATS_SERVER"} & set(inst["env"])
        assert planned["frontend"]["instances"][0]["env"]["ETCD_ENDPOINTS"] == etcd_url
        assert planned["frontend"]["instances"][0]["env"]["NATS_SERVER"] == nats_url
    finally:
        assert_no_survivors(job_dir)


# --------------------------------------------------------------------------- shared rules


def test_etcd_and_nats_must_agree_on_dedicated() -> None:
    got = errors_of(
        DYNAMO
        + "services:\n"
        + "  - name: etcd\n    type: etcd\n    placement: {node: dedicated}\n"
        + "  - name: nats\n    type: nats\n    placement: {node: infra}\n"
    )
    assert got == [
        "recipe.yaml:14:5: services[nats].placement: services etcd and nats must agree on"
        " placement.node: dedicated (they share the infra node)"
    ]


def test_both_dedicated_ask_for_one_more_node_and_share_it() -> None:
    shared = plan(DYNAMO)
    dedicated = plan(
        DYNAMO
        + "services:\n"
        + "  - {name: etcd, type: etcd, placement: {node: dedicated}}\n"
        + "  - {name: nats, type: nats, placement: {node: dedicated}}\n"
    )
    assert len(shared.nodes) == 1
    assert len(dedicated.nodes) == 2
    assert unit(dedicated, "etcd").nodes == unit(dedicated, "nats").nodes == [dedicated.infra]
    assert dedicated.infra != dedicated.head
    assert unit(dedicated, "agg").nodes == [dedicated.head]
    ip = next(n.ip for n in dedicated.nodes if n.name == dedicated.infra)
    assert dedicated.discovery_env == {
        "ETCD_ENDPOINTS": f"http://{ip}:2379",
        "NATS_SERVER": f"nats://{ip}:4222",
    }


@pytest.mark.parametrize(("declared", "follower"), [("nats", "etcd"), ("etcd", "nats")])
def test_an_implied_plane_follows_a_declared_dedicated_one(declared: str, follower: str) -> None:
    """No need to declare both: the implied one's `infra` *is* the dedicated node."""
    p = plan(
        DYNAMO
        + f"services:\n  - {{name: {declared}, type: {declared}, placement: {{node: dedicated}}}}\n"
    )
    assert len(p.nodes) == 2
    assert unit(p, follower).implied_by is not None
    assert unit(p, follower).nodes == unit(p, declared).nodes == [p.infra]


def test_dedicated_with_the_other_plane_external_is_fine() -> None:
    p = plan(
        DYNAMO
        + "services:\n"
        + "  - {name: etcd, type: etcd, placement: {node: dedicated}}\n"
        + "  - {name: nats, type: nats, external: 'nats://bus.example:4222'}\n"
    )
    assert len(p.nodes) == 2
    assert p.discovery_env["NATS_SERVER"] == "nats://bus.example:4222"


def test_external_planes_launch_nothing_and_everyone_gets_their_urls() -> None:
    p = plan(
        DYNAMO
        + 'benchmark: {type: command, command: ["true"]}\n'
        + "services:\n"
        + "  - {name: etcd, type: etcd, external: 'https://etcd.example:2379'}\n"
        + "  - {name: nats, type: nats, external: 'tls://nats.example:4222'}\n"
        + "  - {name: router, command: [sleep, '1']}\n"
    )
    want = {"ETCD_ENDPOINTS": "https://etcd.example:2379", "NATS_SERVER": "tls://nats.example:4222"}
    assert p.discovery_env == want
    assert unit(p, "etcd").instances == unit(p, "nats").instances == []
    for name in ("agg", "frontend", "benchmark", "router"):
        env = unit(p, name).instances[0].env
        assert {k: env[k] for k in want} == want, name
    assert len(p.nodes) == 1


def test_discovery_env_only_for_planes_that_run() -> None:
    p = plan(DYNAMO.replace("dynamo: {request_plane: nats}\n", ""))
    assert set(p.discovery_env) == {"ETCD_ENDPOINTS"}
    for u in p.units:
        for inst in u.instances:
            assert "NATS_SERVER" not in inst.env


def test_inherit_discovery_env_decides_for_services() -> None:
    p = plan(
        DYNAMO
        + "services:\n"
        + "  - {name: told, command: [sleep, '1']}\n"
        + "  - {name: untold, command: [sleep, '1'], inherit_discovery_env: false}\n"
    )
    assert set(unit(p, "told").instances[0].env) >= {"ETCD_ENDPOINTS", "NATS_SERVER"}
    assert not {"ETCD_ENDPOINTS", "NATS_SERVER"} & set(unit(p, "untold").instances[0].env)
    for plane in ("etcd", "nats"):
        assert not {"ETCD_ENDPOINTS", "NATS_SERVER"} & set(unit(p, plane).instances[0].env)


def test_a_recipe_env_value_overrides_the_discovery_env() -> None:
    """The layering: discovery first, then kind defaults, then the recipe's env."""
    p = plan(
        DYNAMO
        + "services:\n"
        + "  - {name: told, command: [sleep, '1'], env: {NATS_SERVER: 'nats://mine:1'}}\n"
    )
    env = unit(p, "told").instances[0].env
    assert env["NATS_SERVER"] == "nats://mine:1"
    assert env["ETCD_ENDPOINTS"] == p.discovery_env["ETCD_ENDPOINTS"]


def test_the_example_recipe_is_valid_and_runs_both_planes() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", "--local", str(EXAMPLE)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "implied by: frontend.type dynamo (declare a service named etcd to change it)" in out
    assert "  ETCD_ENDPOINTS=http://127.0.0.1:2379\n" in out
    assert "  NATS_SERVER=nats://127.0.0.1:4222\n" in out
    assert "infra: " in out


@pytest.mark.parametrize("first", ["etcd", "nats"])
def test_implied_etcd_starts_before_implied_nats_whatever_loaded_first(first: str) -> None:
    """The spec lists the implied services etcd first, then NATS; the order does not
    depend on which plugin pluggy happens to call first (ImpliedService.order)."""
    import srt_etcd.plugin
    import srt_nats.plugin
    from srt_services.plan.text import render_plan
    from srt_services.testing import kit

    ps = kit.isolated_plugins()
    modules = {"etcd": srt_etcd.plugin, "nats": srt_nats.plugin}
    for name in (first, "nats" if first == "etcd" else "etcd"):
        ps.register(modules[name], name=f"srt-{name}")
    p = kit.plan(ps, DYNAMO, source="recipe.yaml")
    assert p.phases["infra"] == ["etcd", "nats"]
    assert [u.name for u in p.units][:2] == ["etcd", "nats"]
    assert "  infra: etcd, nats\n" in render_plan(p)
