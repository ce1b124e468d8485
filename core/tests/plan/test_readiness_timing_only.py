"""A ``readiness`` block with timing only tunes the kind's default probe (the
specification's gms entry writes just ``timeout_seconds``), instead of being refused."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from srt_services.contracts.plan import Plan
from srt_services.extend import DefaultProbe, InstanceContext, ServiceKind, ServiceSpec
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.problems import RecipeError
from srt_services.testing import kit
from srt_services.testing.kit import ClassesPlugin


class Probed(ServiceKind):
    name: ClassVar[str] = "x-probed"
    summary: ClassVar[str] = "gates on a port of its own"
    requires_command: ClassVar[bool] = True
    default_readiness_timeout: ClassVar[float] = 300.0

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        return DefaultProbe("tcp", {"port": 7711}, interval=0.5)


def recipe(readiness: str, kind: str = "x-probed") -> str:
    return (
        "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"
        f"  - name: a\n    type: {kind}\n    command: [a]\n    readiness: {readiness}\n"
    )


@pytest.fixture
def plugins(srt_plugins: PluginSet) -> PluginSet:
    srt_plugins.register(ClassesPlugin([Probed]), "probed")
    return srt_plugins


def probe_of(plan: Plan) -> Any:
    (unit,) = [u for u in plan.units if u.name == "a"]
    (inst,) = unit.instances
    return inst.readiness


def test_without_a_block_the_kind_default_runs(plugins: PluginSet) -> None:
    text = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"
    text += "  - {name: a, type: x-probed, command: [a]}\n"
    got = probe_of(kit.plan(plugins, text))
    assert (got.probe, got.config["port"], got.timeout, got.interval) == ("tcp", 7711, 300.0, 0.5)


def test_a_timeout_alone_tunes_the_kind_probe(plugins: PluginSet) -> None:
    got = probe_of(kit.plan(plugins, recipe("{timeout_seconds: 900}")))
    assert (got.probe, got.config["port"], got.timeout, got.interval) == ("tcp", 7711, 900.0, 0.5)


def test_an_interval_alone_keeps_the_kind_timeout(plugins: PluginSet) -> None:
    got = probe_of(kit.plan(plugins, recipe("{interval_seconds: 3}")))
    assert (got.probe, got.config["port"], got.timeout, got.interval) == ("tcp", 7711, 300.0, 3.0)


def test_a_written_probe_still_replaces_the_default(plugins: PluginSet) -> None:
    got = probe_of(kit.plan(plugins, recipe("{port: 9000, timeout_seconds: 5}")))
    assert (got.probe, got.config["port"], got.timeout) == ("tcp", 9000, 5.0)


def test_a_kind_without_a_default_probe_still_needs_one(plugins: PluginSet) -> None:
    with pytest.raises(RecipeError) as info:
        kit.load(plugins, recipe("{timeout_seconds: 900}", kind="generic"))
    (p,) = info.value.errors
    assert p.message == "give exactly one probe (port, tcp, http, log or file), got none"
