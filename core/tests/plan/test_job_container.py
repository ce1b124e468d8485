"""The job container (the recipe's top-level ``container``): who runs in it, who does not,
and what the dry-run shows (spec services.md: a service's container defaults to "type
fallback, then job container")."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from srt_services.contracts.plan import Plan
from srt_services.extend import Recipe, ServiceKind, ServiceSpec, hookimpl
from srt_services.plan.text import render_plan

JOB = {
    "container": "job-image",
    "resources": {"gpus_per_node": 8},
    "frontend": {"type": "sglang", "command": ["python3", "-m", "f"]},
    "roles": {"agg": {"workers": 2, "command": ["python3", "-m", "w"]}},
    "benchmark": {"type": "command", "command": ["bench"]},
}


class Store(ServiceKind):
    name: ClassVar[str] = "x-store"
    summary: ClassVar[str] = "runs in its master's image"
    requires_command: ClassVar[bool] = True

    def container_fallback(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> str | None:
        masters = [s for s in recipe.services if s.name == "master"]
        return masters[0].container if masters else None


class HostBinary(ServiceKind):
    name: ClassVar[str] = "x-host"
    summary: ClassVar[str] = "a host binary"
    requires_command: ClassVar[bool] = True
    host_native: ClassVar[bool] = True


class Kinds:
    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [Store, HostBinary]


@pytest.fixture
def plan(srt_register: Callable[..., str], srt_plan: Callable[..., Plan]) -> Callable[..., Plan]:
    srt_register(Kinds(), "kinds")

    def make(services: list[dict[str, Any]], **more: Any) -> Plan:
        return srt_plan({**JOB, "services": services, **more})

    return make


def test_workers_frontend_and_benchmark_run_in_the_job_container(
    plan: Callable[..., Plan],
) -> None:
    p = plan([], roles={"agg": {"workers": 2, "command": ["w"]}, "prefill": {"command": ["p"],
              "container": "own-image"}})  # fmt: skip
    for name in ("agg", "frontend", "benchmark"):
        unit = p.unit(name)
        assert unit.container == "job-image", name
        assert {i.container for i in unit.instances} == {"job-image"}
    assert p.unit("prefill").container == "own-image", "a role's own container wins"


def test_services_inherit_it_after_their_own_and_their_kinds_fallback(
    plan: Callable[..., Plan],
) -> None:
    p = plan(
        [
            {"name": "plain", "command": ["x"]},
            {"name": "own", "command": ["x"], "container": "own:1"},
            {"name": "master", "command": ["x"], "container": "mooncake:1"},
            {"name": "store", "type": "x-store", "command": ["x"]},
            {"name": "exporter", "type": "x-host", "command": ["x"]},
            {"name": "exporter-img", "type": "x-host", "command": ["x"], "container": "exp:1"},
        ]
    )
    assert p.unit("plain").container == "job-image"
    assert p.unit("own").container == "own:1"
    assert p.unit("store").container == "mooncake:1", "the kind's fallback comes first"
    assert p.unit("exporter").container is None, "a host-native kind runs on the bare node"
    assert p.unit("exporter-img").container == "exp:1"


def test_a_kinds_container_fallback_applies_only_when_the_entry_writes_none(
    plan: Callable[..., Plan],
) -> None:
    p = plan(
        [
            {"name": "master", "command": ["x"], "container": "mooncake:1"},
            {"name": "store", "type": "x-store", "command": ["x"]},
            {"name": "own", "type": "x-store", "command": ["x"], "container": "other:2"},
        ]
    )
    assert p.unit("store").container == "mooncake:1"
    assert [i.container for i in p.unit("store").instances] == ["mooncake:1"]
    assert p.unit("own").container == "other:2"


def test_a_fallback_to_an_entry_without_an_image_falls_back_to_the_job_container(
    plan: Callable[..., Plan],
) -> None:
    p = plan(
        [
            {"name": "master", "command": ["x"]},
            {"name": "store", "type": "x-store", "command": ["x"]},
        ]
    )
    assert p.unit("store").container == "job-image"


def test_without_a_job_container_nothing_is_invented(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan({**JOB, "container": None, "services": [{"name": "s", "command": ["x"]}]})
    assert all(u.container is None for u in p.units)
    assert "container: none (runs on the node itself)" in render_plan(p)


def test_the_job_container_may_use_placeholders(plan: Callable[..., Plan]) -> None:
    p = plan([{"name": "s", "command": ["x"], "placement": {"node": "workers"}}],
             container="img-{job_name}")  # fmt: skip
    assert {i.container for i in p.unit("s").instances} == {f"img-{p.job_name}"}


def test_an_unknown_placeholder_in_it_is_refused_with_its_line(
    srt_problem: Callable[..., Any],
) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        container: "img:{nod}"
        frontend: {type: none}
        """
    )
    assert p.label == "container"
    assert p.message.startswith("unknown placeholder {nod} (did you mean {node}?)")
    assert (p.line, p.column) == (3, 1)


def test_dry_run_shows_the_effective_image_per_unit_with_its_site_alias(
    plan: Callable[..., Plan],
) -> None:
    p = plan([{"name": "plain", "command": ["x"]}, {"name": "exporter", "type": "x-host",
              "command": ["x"]}], container="mooncake")  # fmt: skip
    only = frozenset({"plain", "exporter", "agg"})
    text = render_plan(p, only, aliases={"mooncake": "registry.example/mooncake:0.3"})
    blocks: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("  ") and line[2] != " ":
            name = line.split()[0]
        blocks[name] = blocks.get(name, "") + line + "\n"
    assert "container: mooncake (site alias of registry.example/mooncake:0.3)" in blocks["plain"]
    assert "container: none (runs on the node itself)" in blocks["exporter"]
    assert "container: mooncake (site alias" in blocks["agg"]
    assert "<job container>" not in text


def test_the_local_launcher_warns_for_every_unit_the_job_container_reaches(
    srt_register: Callable[..., str], srt_plan: Callable[..., Plan]
) -> None:
    """Planned to run here, as `srt run` plans: the local launcher applies no image, and the
    plan says so for every unit that has one (the host binary has none)."""
    srt_register(Kinds(), "kinds")
    services = [{"name": "plain", "command": ["x"]}, {"name": "exporter", "type": "x-host",
                "command": ["x"]}]  # fmt: skip
    p = srt_plan({**JOB, "services": services}, runs_here=True)
    warned = {w.split(":")[0] for w in p.warnings}
    assert warned == {"services[plain]", "agg", "frontend", "benchmark"}
    assert all("the local launcher does not apply container" in w for w in p.warnings)


def test_srun_lines_carry_the_job_container_resolved_through_the_site_alias(
    tmp_path: Path, srt_env: dict[str, str]
) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[containers]\naliases = {job = "registry.example/job:1"}\n')
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        textwrap.dedent(
            """
            schema: 2
            name: ctr
            container: job
            services:
              - {name: a, command: [sleep, "1"]}
            """
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", str(recipe), "--srun"],
        capture_output=True,
        text=True,
        env={**srt_env, "SRT_SITE_CONFIG": str(site)},
        check=True,
    )
    assert "container: job (site alias of registry.example/job:1)" in out.stdout
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("service_a:"))
    assert "--container-image=registry.example/job:1" in line
