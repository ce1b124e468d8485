"""Every ``srt_*`` hook, called through the typed facade (``PluginSet``), never ``pm.hook``.

A recording plugin implements every hook; each test asks the facade for what the hook
provides and checks that the hook ran and its result came back. ``CALLS`` must name every
hookspec (``test_every_hook_has_a_facade_test``), so a new hook fails here until it has a
facade test, and ``docs/plugins.md`` must document it (``test_every_hook_is_documented``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import rich_click as click
import srt_services
from srt_services import docs_gen, hookspecs
from srt_services.contracts.benchmark import BenchmarkKind
from srt_services.contracts.engine import Engine
from srt_services.contracts.expansion import Expansion, InstanceSeed
from srt_services.contracts.formats import RecipeFormat
from srt_services.contracts.implied import ImpliedService
from srt_services.contracts.kind import ServiceKind
from srt_services.contracts.launcher import Launcher
from srt_services.contracts.placement import Placement
from srt_services.contracts.probe import Probe
from srt_services.contracts.report import ReportSection
from srt_services.contracts.status import StatusSection
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.models import Recipe, StrictModel
from srt_services.recipe.problems import Problem
from srt_services.testing import kit


class RecKind(ServiceKind):
    name: ClassVar[str] = "rec-kind"
    summary: ClassVar[str] = "recorded"


class RecPlacement(Placement):
    name: ClassVar[str] = "rec-placement"

    def nodes(self, layout: Any, pool: str | None = None) -> tuple[Any, ...]:
        return (layout.head,)


class RecExpansion(Expansion):
    name: ClassVar[str] = "rec-expansion"

    def seeds(self, service: str, nodes: Any, layout: Any, worker_roles: Any) -> list[InstanceSeed]:
        return [InstanceSeed(node=n, step=f"service_{service}_rec_{n.name}") for n in nodes]


class RecProbeConfig(StrictModel):
    token: str = "x"


class RecProbe(Probe):
    name: ClassVar[str] = "rec-probe"
    Config: ClassVar[type[RecProbeConfig]] = RecProbeConfig
    instance_scoped: ClassVar[bool] = True


class RecLauncher(Launcher):
    name: ClassVar[str] = "rec-launcher"


class RecEngine(Engine):
    name: ClassVar[str] = "rec-engine"
    backends: ClassVar[frozenset[str]] = frozenset({"mocker"})


class RecBenchmark(BenchmarkKind):
    name: ClassVar[str] = "rec-bench"


class RecFormat(RecipeFormat):
    name: ClassVar[str] = "rec-format"


@click.command("rec-command")
def rec_command() -> None:
    """A recorded command."""


class Recorder:
    """Implements every hook and records each call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @srt_services.hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        self.calls.append("srt_register_service_kinds")
        return [RecKind]

    @srt_services.hookimpl
    def srt_register_placements(self) -> list[type[Placement]]:
        self.calls.append("srt_register_placements")
        return [RecPlacement]

    @srt_services.hookimpl
    def srt_register_expansions(self) -> list[type[Expansion]]:
        self.calls.append("srt_register_expansions")
        return [RecExpansion]

    @srt_services.hookimpl
    def srt_register_probes(self) -> list[type[Probe]]:
        self.calls.append("srt_register_probes")
        return [RecProbe]

    @srt_services.hookimpl
    def srt_register_launchers(self) -> list[type[Launcher]]:
        self.calls.append("srt_register_launchers")
        return [RecLauncher]

    @srt_services.hookimpl
    def srt_register_engines(self) -> list[type[Engine]]:
        self.calls.append("srt_register_engines")
        return [RecEngine]

    @srt_services.hookimpl
    def srt_register_benchmarks(self) -> list[type[BenchmarkKind]]:
        self.calls.append("srt_register_benchmarks")
        return [RecBenchmark]

    @srt_services.hookimpl
    def srt_register_recipe_formats(self) -> list[type[RecipeFormat]]:
        self.calls.append("srt_register_recipe_formats")
        return [RecFormat]

    @srt_services.hookimpl
    def srt_cli_commands(self) -> list[click.Command]:
        self.calls.append("srt_cli_commands")
        return [rec_command]

    @srt_services.hookimpl
    def srt_implied_services(self, recipe: Recipe) -> list[ImpliedService]:
        self.calls.append("srt_implied_services")
        return [ImpliedService({"name": "rec", "type": "rec-kind"}, f"recipe {recipe.name}")]

    @srt_services.hookimpl
    def srt_validate_recipe(self, recipe: Recipe) -> list[Problem]:
        self.calls.append("srt_validate_recipe")
        return [Problem(("name",), "recorded", warning=True)]

    @srt_services.hookimpl
    def srt_report_sections(self, job_dir: str) -> list[ReportSection]:
        self.calls.append("srt_report_sections")
        return [ReportSection(title=f"recorded {job_dir}", html="<p>recorded</p>")]

    @srt_services.hookimpl
    def srt_status_sections(self, job_dir: str) -> list[StatusSection]:
        self.calls.append("srt_status_sections")
        return [StatusSection(title=f"recorded {job_dir}", lines=("recorded",))]


RECIPE = Recipe.model_validate({"schema": 2, "name": "job"})


def _kinds(p: PluginSet) -> Any:
    assert p.kind("rec-kind").summary == "recorded"
    return p.kinds()["rec-kind"]


def _placements(p: PluginSet) -> Any:
    assert isinstance(p.placement("rec-placement"), RecPlacement)
    return p.placements()["rec-placement"]


def _expansions(p: PluginSet) -> Any:
    assert isinstance(p.expansion("rec-expansion"), RecExpansion)
    return p.expansions()["rec-expansion"]


def _probes(p: PluginSet) -> Any:
    assert p.probe("rec-probe").Config is RecProbeConfig
    return p.probes()["rec-probe"]


def _launchers(p: PluginSet) -> Any:
    assert p.launcher_class("rec-launcher") is RecLauncher
    return RecLauncher


def _engines(p: PluginSet) -> Any:
    assert isinstance(p.engine("rec-engine"), RecEngine)
    return p.engines()["rec-engine"]


def _benchmarks(p: PluginSet) -> Any:
    assert isinstance(p.benchmark("rec-bench"), RecBenchmark)
    return p.benchmarks()["rec-bench"]


def _formats(p: PluginSet) -> Any:
    assert isinstance(p.recipe_format("rec-format"), RecFormat)
    return p.recipe_formats()["rec-format"]


def _cli(p: PluginSet) -> Any:
    owner, command = p.cli_commands()["rec-command"]
    assert owner == "recorder"
    return command


def _implied(p: PluginSet) -> Any:
    (item,) = [i for i in p.implied_services(RECIPE) if i.name == "rec"]
    assert item.reason == "recipe job"
    return item


def _validate(p: PluginSet) -> Any:
    (problem,) = [x for x in p.validate_recipe(RECIPE) if x.message == "recorded"]
    assert problem.warning
    return problem


def _report(p: PluginSet) -> Any:
    ((_owner, section),) = [x for x in p.report_sections("/jobs/j") if x[0] == "recorder"]
    assert not isinstance(section, str) and section.title == "recorded /jobs/j"
    return section


def _status(p: PluginSet) -> Any:
    ((_owner, section),) = [x for x in p.status_sections("/jobs/j") if x[0] == "recorder"]
    assert not isinstance(section, str) and section.lines == ("recorded",)
    return section


#: hook -> a call through the facade that must reach it
CALLS: dict[str, Callable[[PluginSet], Any]] = {
    "srt_register_service_kinds": _kinds,
    "srt_register_placements": _placements,
    "srt_register_expansions": _expansions,
    "srt_register_probes": _probes,
    "srt_register_launchers": _launchers,
    "srt_register_engines": _engines,
    "srt_register_benchmarks": _benchmarks,
    "srt_register_recipe_formats": _formats,
    "srt_cli_commands": _cli,
    "srt_implied_services": _implied,
    "srt_validate_recipe": _validate,
    "srt_report_sections": _report,
    "srt_status_sections": _status,
}


@pytest.mark.parametrize("hook", sorted(CALLS))
def test_hook_called_through_the_facade(hook: str) -> None:
    plugins = kit.isolated_plugins()
    recorder = Recorder()
    plugins.register(recorder, "recorder")  # the registration hooks run here, via the facade
    assert CALLS[hook](plugins) is not None
    assert hook in recorder.calls


def test_unregister_drops_what_the_plugin_registered() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(Recorder(), "recorder")
    assert plugins.has("kind", "rec-kind")
    plugins.unregister("recorder")
    assert not plugins.has("kind", "rec-kind")
    assert "rec-command" not in plugins.cli_commands()


def test_recorded_kind_reaches_a_plan() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(Recorder(), "recorder")
    text = (
        "schema: 2\nname: job\nobservability: {metrics: false}\nservices:\n"
        "  - {name: a, command: [a], placement: {node: rec-placement, per: node},"
        " readiness: {rec-probe: {token: y}}}\n"
    )
    loaded = kit.load(plugins, text, "r.yaml")
    assert [w.message for w in loaded.warnings] == ["recorded"]
    plan = kit.plan(plugins, text, source="r.yaml")
    assert plan.unit("rec").implied_by == "recipe job"
    assert plan.unit("a").instances[0].readiness is not None
    assert plan.unit("a").instances[0].readiness.config == {"token": "y"}


def test_two_plugins_with_one_name_are_refused_naming_both() -> None:
    class OtherKind(ServiceKind):
        name: ClassVar[str] = "rec-kind"

    class Other:
        @srt_services.hookimpl
        def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
            return [OtherKind]

    plugins = kit.isolated_plugins()
    plugins.register(Recorder(), "first")
    plugins.register(Other(), "second")
    with pytest.raises(srt_services.errors.PluginError) as info:
        plugins.kind("rec-kind")
    assert "registered by both first and second" in str(info.value)


def test_unknown_hook_is_refused_with_a_suggestion() -> None:
    class Typo:
        @srt_services.hookimpl
        def srt_register_kinds(self) -> list[Any]:
            return []

    plugins = kit.isolated_plugins()
    with pytest.raises(srt_services.errors.PluginError) as info:
        plugins.register(Typo(), "typo")
    assert "did you mean srt_register_service_kinds?" in str(info.value)


# --------------------------------------------------------------------------- meta


def test_every_hook_has_a_facade_test() -> None:
    specs = {name for name in dir(hookspecs) if name.startswith("srt_")}
    assert set(CALLS) == specs
    assert set(docs_gen.FACADE) == specs
    recorder_hooks = {name for name in dir(Recorder) if name.startswith("srt_")}
    assert recorder_hooks == specs


def test_every_hook_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "plugins.md").read_text()
    for name in docs_gen.hook_names():
        assert f"## {name}\n" in docs, f"{name} is not in docs/plugins.md"
        assert docs_gen.signature_text(getattr(hookspecs, name)) in docs
