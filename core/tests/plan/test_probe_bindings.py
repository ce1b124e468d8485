"""Probe blocks travel from the checks to the planner bound to their probe, never looked up.

The checks validate each readiness and liveness block against its probe's own model; the
binding goes with the service (or the frontend, or the role) it belongs to. A block that
reaches the planner without one is a bug in srt and stops the plan: an instance silently
planned without the user's probe would count as started as soon as it was launched.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.app import compose
from srt_services.checking.settled import UnboundProbe
from srt_services.contracts.allocation import AllocationRequest
from srt_services.contracts.plan import Plan
from srt_services.testing import LoadedRecipe, PluginSet, kit

RECIPE = """
schema: 2
name: t
frontend:
  type: sglang
  command: [router]
  readiness: {http: {port: 8000, path: /health}}
roles:
  agg:
    workers: 1
    port: 30000
    command: [w, --port, "{worker_port}"]
    readiness: {log: {pattern: worker up}}
services:
  - name: a
    command: [a]
    readiness: {port: 7000}
    liveness: {http: {port: 7000, path: /live}, period_seconds: 5}
  - name: b
    command: [b]
    readiness: {log: {pattern: ready}}
  - name: c
    command: [c]
    readiness: {log: {pattern: ready}}
  - name: quiet
    command: [q]
"""


def test_the_checks_bind_every_block_to_its_probe(srt_load: Callable[..., LoadedRecipe]) -> None:
    loaded = srt_load(RECIPE)
    a, b, c, quiet = loaded.services
    assert a.readiness is not None and a.readiness.probe.name == "tcp"
    assert a.readiness.block is a.spec.readiness
    assert a.liveness is not None and a.liveness.probe.name == "http"
    assert a.liveness.config.path == "/live"
    # equal settings are validated once, but each block keeps its own binding
    assert b.readiness is not None and c.readiness is not None
    assert b.readiness.config is c.readiness.config
    assert b.readiness.block is b.spec.readiness and c.readiness.block is c.spec.readiness
    assert quiet.readiness is None and quiet.liveness is None
    frontend = loaded.job_probes.frontend
    assert frontend is not None and frontend.probe.name == "http"
    assert set(loaded.job_probes.roles) == {"agg"}
    assert loaded.job_probes.roles["agg"].probe.name == "log"


def test_the_plan_takes_each_probe_from_its_binding(srt_plan: Callable[..., Plan]) -> None:
    planned = srt_plan(RECIPE)
    (a,) = planned.unit("a").instances
    assert a.readiness is not None and a.readiness.probe == "tcp"
    assert a.readiness.config["port"] == 7000
    assert a.liveness is not None and a.liveness.config["url"].endswith(":7000/live")
    assert a.liveness.period == 5
    (worker,) = planned.unit("agg").instances
    assert worker.readiness is not None and worker.readiness.probe == "log"
    (frontend,) = planned.unit("frontend").instances
    assert frontend.readiness is not None
    assert frontend.readiness.config["url"].endswith(":8000/health")
    (quiet,) = planned.unit("quiet").instances
    assert quiet.readiness is None


def _drop_service_readiness(loaded: LoadedRecipe) -> None:
    loaded.services[0].readiness = None


def _drop_service_liveness(loaded: LoadedRecipe) -> None:
    loaded.services[0].liveness = None


def _drop_role_readiness(loaded: LoadedRecipe) -> None:
    loaded.job_probes.roles.clear()


def _drop_frontend_readiness(loaded: LoadedRecipe) -> None:
    loaded.job_probes.frontend = None


@pytest.mark.parametrize(
    ("drop", "where"),
    [
        (_drop_service_readiness, "services[a].readiness"),
        (_drop_service_liveness, "services[a].liveness"),
        (_drop_role_readiness, "roles.agg.readiness"),
        (_drop_frontend_readiness, "frontend.readiness"),
    ],
)
def test_a_block_without_its_binding_stops_the_plan(
    srt_load: Callable[..., LoadedRecipe],
    srt_plugins: PluginSet,
    drop: Callable[[LoadedRecipe], None],
    where: str,
) -> None:
    loaded = srt_load(RECIPE)
    drop(loaded)
    with pytest.raises(UnboundProbe) as raised:
        compose.plan(kit.setup(srt_plugins), loaded, AllocationRequest())
    assert str(raised.value).startswith(f"{where}: ")
