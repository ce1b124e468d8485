"""Contract suites: the tests every kind, engine, probe and placement must pass, written once.

A plugin's test module subclasses a contract and overrides one fixture (the fsspec
``tests/abstract`` pattern)::

    import pytest
    from srt_services.testing.contracts import KindCase, ServiceKindContract

    import srt_etcd.plugin
    from srt_etcd.kind import EtcdKind

    class TestEtcdKind(ServiceKindContract):
        @pytest.fixture
        def kind_case(self) -> KindCase:
            return KindCase(EtcdKind, entries=[{}, {"options": {"client_port": 2479}}],
                            plugin=srt_etcd.plugin)

The contract's tests then run against that case through the real loader and planner
(``srt validate`` and ``srt dry-run`` in-process), with the plugin registered in an isolated
plugin set: nothing else installed takes part. A failure message says which sample entry
broke which rule, because plugin authors read these messages far more often than the suite.

The classes are abstract on purpose: their names do not start with ``Test``, so pytest
collects them only through a subclass.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from srt_services.testing import kit

if TYPE_CHECKING:
    from srt_services.contracts.engine import Engine
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.plan import Plan, PlannedUnit
    from srt_services.contracts.probe import Probe
    from srt_services.plugins.manager import PluginSet

#: A recipe fragment with a frontend and two aggregated workers on two nodes: enough for
#: every built-in placement (head, infra, agg, workers, compute, all) to select something.
JOB_WITH_WORKERS: dict[str, Any] = {
    "frontend": {"type": "sglang", "command": ["python3", "-m", "frontend", "--port", "8000"]},
    "roles": {"agg": {"workers": 2, "command": ["python3", "-m", "worker"], "port": 30000}},
    "resources": {"gpus_per_node": 8},
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def unrendered(text: str) -> list[str]:
    """Placeholders srt knows that are still in ``text`` after rendering.

    Only names srt would have rendered count: a literal ``{x}`` a kind writes on purpose
    (as ``{{x}}``) for a config language of its own is fine when ``x`` is not one of them.
    """
    from srt_services.recipe import placeholders as ph

    return [
        m.group(2)
        for m in ph.PLACEHOLDER_RE.finditer(text)
        if m.group(2) is not None and m.group(2) in ph.ALL
    ]


def _register_all(plugins: PluginSet, objs: Sequence[object]) -> None:
    for obj in objs:
        plugins.register(obj, getattr(obj, "__name__", None) or f"kit-{id(obj):x}")


def _case_plugins(
    plugin: object | None, stand_in: kit.ClassesPlugin, extra: Sequence[object] = ()
) -> PluginSet:
    """An isolated plugin set holding the case's plugin, or ``stand_in`` registering just the
    class under test when the case names none (a class tested before its plugin module
    exists), and the ``extra`` plugins it needs; every contract suite starts from one."""
    plugins = kit.isolated_plugins()
    _register_all(plugins, [plugin if plugin is not None else stand_in, *extra])
    return plugins


def _assert_one_line_summary(summary: str, what: str) -> None:
    """``srt kinds`` and the docs show a registered class's ``summary`` as one line."""
    assert summary, f"a {what} needs a one-line `summary` (srt kinds, docs)"
    assert "\n" not in summary, "`summary` must be one line (srt kinds, docs)"


# =========================================================================== service kinds


@dataclass
class KindCase:
    """What a kind's contract suite needs to know.

    ``entries`` are ``services`` entries using the kind; ``type`` and ``name`` are filled in,
    so ``{}`` is a valid entry for a kind that needs nothing. Each becomes its own recipe:
    ``recipe`` (top-level keys such as ``frontend``, ``roles``, ``dynamo``) plus the entry.
    ``plugin`` is the module holding the plugin's hookimpls; without it a stand-in plugin
    registers just ``kind``. ``extra_plugins`` are registered too (a kind whose recipe
    needs another plugin's kind).
    """

    kind: type[ServiceKind]
    entries: Sequence[Mapping[str, Any]] = ()
    recipe: Mapping[str, Any] = field(default_factory=dict)
    plugin: object | None = None
    extra_plugins: Sequence[object] = ()
    nodes: int | None = None

    def sample_entries(self) -> list[dict[str, Any]]:
        if self.entries:
            return [dict(e) for e in self.entries]
        if self.kind.requires_command:
            return [{"command": ["python3", "-c", "import time; time.sleep(60)"]}]
        return [{}]


class ServiceKindContract:
    """The shared suite for a service kind; override :meth:`kind_case` in a subclass.

    Checks: registration through the plugin; name, summary and defaults are valid
    vocabulary; the options model is closed (an unknown key is refused, naming the kind);
    every sample validates and dry-runs with every placeholder rendered; env layering
    (recipe ``env`` over ``default_env``, ``forced_env`` over both); ``listen_ports`` are
    valid and in the plan's port ledger; placement rules (allowed placements exist, a
    disallowed one is refused clearly); ``external`` and ``command`` rules; the JSON Schema.
    """

    # ----------------------------------------------------------------- the one override

    @pytest.fixture
    def kind_case(self) -> KindCase:
        """Override: return a :class:`KindCase` for the kind under test."""
        pytest.fail(
            f"{type(self).__name__} subclasses ServiceKindContract but does not override the"
            " kind_case fixture"
        )

    # ----------------------------------------------------------------- derived fixtures

    @pytest.fixture
    def kind_plugins(self, kind_case: KindCase) -> PluginSet:
        """An isolated plugin set with the case's plugin(s) registered."""
        stand_in = kit.ClassesPlugin([kind_case.kind])
        return _case_plugins(kind_case.plugin, stand_in, kind_case.extra_plugins)

    @pytest.fixture
    def kind(self, kind_plugins: PluginSet, kind_case: KindCase) -> ServiceKind:
        return kind_plugins.kind(kind_case.kind.name)

    @pytest.fixture
    def samples(self, kind_case: KindCase) -> list[kit.Sample]:
        return kit.samples_for(kind_case.kind.name, kind_case.sample_entries(), kind_case.recipe)

    # ----------------------------------------------------------------- helpers

    def _plan(self, plugins: PluginSet, sample: kit.Sample, case: KindCase) -> Plan:
        from srt_services.recipe.placeholders import UnknownPlaceholder
        from srt_services.recipe.problems import RecipeError

        try:
            return kit.plan(plugins, sample.recipe, nodes=case.nodes)
        except RecipeError as exc:
            pytest.fail(f"sample {sample.label} {sample.entry} does not dry-run:\n{exc}")
        except UnknownPlaceholder as exc:
            pytest.fail(
                f"sample {sample.label}: the kind returned a string with the placeholder"
                f" {{{exc.args[0]}}}, which srt does not know for this instance (write"
                f" {{{{{exc.args[0]}}}}} for a literal brace)"
            )

    def _unit(self, plan: Plan, sample: kit.Sample) -> PlannedUnit:
        return plan.unit(sample.service)

    def _refused(self, plugins: PluginSet, sample: kit.Sample, *needles: str) -> str:
        errors = kit.recipe_errors(plugins, sample.recipe)
        assert errors, f"expected {sample.entry} to be refused, but it loaded"
        text = "\n".join(errors)
        for needle in needles:
            assert needle in text, f"expected {needle!r} in the error:\n{text}"
        return text

    # ----------------------------------------------------------------- registration

    def test_registered_by_its_plugin(self, kind_plugins: PluginSet, kind_case: KindCase) -> None:
        found = kind_plugins.kind(kind_case.kind.name)
        assert isinstance(found, kind_case.kind)
        if kind_case.plugin is not None:
            owner = kind_plugins.owner("kind", kind_case.kind.name)
            expected = getattr(kind_case.plugin, "__name__", None)
            assert expected is None or owner == expected, f"registered by {owner}"

    def test_name_and_summary(self, kind_case: KindCase) -> None:
        from srt_services.names import name_problem

        name = getattr(kind_case.kind, "name", None)
        assert isinstance(name, str), "a kind needs a class attribute `name`"
        problem = name_problem(name)
        assert problem is None, f"kind name {name!r} {problem}"
        _assert_one_line_summary(kind_case.kind.summary, "kind")

    # ----------------------------------------------------------------- defaults

    def test_defaults_are_valid_vocabulary(
        self, kind_plugins: PluginSet, kind: ServiceKind
    ) -> None:
        from srt_services.recipe.models import PHASES

        placements = set(kind_plugins.placements())
        expansions = set(kind_plugins.expansions())
        assert kind.default_start in PHASES, f"default_start {kind.default_start!r} not in {PHASES}"
        assert isinstance(kind.default_critical, bool), "default_critical must be a bool"
        assert kind.default_per in expansions, (
            f"default_per {kind.default_per!r} is not a registered expansion {sorted(expansions)}"
        )
        assert kind.default_placement in placements, (
            f"default_placement {kind.default_placement!r} is not a registered placement"
            f" {sorted(placements)}"
        )
        if kind.allowed_placements is not None:
            assert kind.default_placement in kind.allowed_placements, (
                "default_placement must be one of allowed_placements"
            )
        assert kind.default_stop_grace >= 0
        assert kind.default_readiness_timeout > 0
        assert kind.default_readiness_interval > 0
        assert not (kind.requires_command and kind.forbids_command), (
            "requires_command and forbids_command contradict each other"
        )
        if kind.external_schemes:
            assert kind.supports_external, "external_schemes without supports_external"

    def test_allowed_placements_exist(self, kind_plugins: PluginSet, kind: ServiceKind) -> None:
        if kind.allowed_placements is None:
            return
        placements = set(kind_plugins.placements())
        unknown = set(kind.allowed_placements) - placements
        assert not unknown, f"allowed_placements names unregistered placements {sorted(unknown)}"
        if "dedicated" in kind.allowed_placements:
            assert kind.supports_dedicated, "allows placement dedicated but not supports_dedicated"

    # ----------------------------------------------------------------- options

    def test_options_model_is_closed(self, kind: ServiceKind) -> None:
        from pydantic import BaseModel

        assert isinstance(kind.Options, type)
        assert issubclass(kind.Options, BaseModel)
        extra = kind.Options.model_config.get("extra")
        assert extra == "forbid", (
            "the options model must refuse unknown keys (subclass srt_services.contracts.kind."
            f"KindOptions); model_config extra is {extra!r}"
        )
        json.dumps(kind.Options.model_json_schema())

    def test_unknown_option_is_refused_naming_the_kind(
        self, kind_plugins: PluginSet, samples: list[kit.Sample]
    ) -> None:
        sample = samples[0]
        options = dict(sample.entry.get("options") or {})
        options["kit_no_such_option"] = 1
        bad = sample.with_entry(options=options)
        name = str(sample.entry["type"])
        self._refused(kind_plugins, bad, f"type {name!r} does not understand", "kit_no_such_option")

    def test_samples_validate(self, kind_plugins: PluginSet, samples: list[kit.Sample]) -> None:
        for sample in samples:
            errors = kit.recipe_errors(kind_plugins, sample.recipe)
            assert not errors, f"sample {sample.label} {sample.entry} is refused:\n" + "\n".join(
                errors
            )

    def test_json_schema_includes_options(self, kind_plugins: PluginSet, kind: ServiceKind) -> None:
        from srt_services.checking.schema import recipe_schema

        schema = recipe_schema(kind_plugins)
        json.dumps(schema)
        assert kind.name in schema["$defs"]["ServiceSpec"]["properties"]["type"]["examples"]

    # ----------------------------------------------------------------- dry run

    def test_dry_run_renders_everything(
        self, kind_plugins: PluginSet, kind_case: KindCase, samples: list[kit.Sample]
    ) -> None:
        for sample in samples:
            plan = self._plan(kind_plugins, sample, kind_case)
            plan.to_json()
            unit = self._unit(plan, sample)
            if unit.external is not None:
                assert not unit.instances
                continue
            assert unit.instances, f"sample {sample.label} plans no instance"
            for inst in unit.instances:
                assert inst.argv, f"{inst.step}: empty argv (the kind's command() returned none)"
                parts = {
                    "argv": inst.argv,
                    "env": inst.env,
                    "preamble": inst.preamble,
                    "files": inst.files,
                    "cwd": inst.cwd,
                    "readiness": inst.readiness.config if inst.readiness else None,
                }
                for where, value in parts.items():
                    for text in _strings(value):
                        left = unrendered(text)
                        assert not left, (
                            f"sample {sample.label}, {inst.step}: {where} still holds"
                            f" {{{left[0]}}} after rendering: {text!r}"
                        )
                for key in inst.env:
                    assert isinstance(inst.env[key], str), f"env {key} is not a string"

    def test_skip_reason_and_discovery_env_types(
        self, kind_plugins: PluginSet, kind: ServiceKind, samples: list[kit.Sample]
    ) -> None:
        for sample in samples:
            loaded = kit.load(kind_plugins, sample.recipe)
            settled = next(s for s in loaded.services if s.name == sample.service)
            reason = kind.skip_reason(settled.spec, settled.options)
            assert reason is None or isinstance(reason, str)
            env = kind.discovery_env(settled.spec, settled.options, "10.0.0.1")
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())

    # ----------------------------------------------------------------- env layering

    def test_env_layering(
        self,
        kind_plugins: PluginSet,
        kind_case: KindCase,
        kind: ServiceKind,
        samples: list[kit.Sample],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        from srt_services.names import DANGEROUS_ENV, env_name_problem

        defaults: dict[str, str] = {}
        forced: dict[str, str] = {}
        real_default, real_forced = kind.default_env, kind.forced_env

        def spy_default(*args: Any, **kwargs: Any) -> dict[str, str]:
            result = real_default(*args, **kwargs)
            defaults.update(result)
            return result

        def spy_forced(*args: Any, **kwargs: Any) -> dict[str, str]:
            result = real_forced(*args, **kwargs)
            forced.update(result)
            return result

        monkeypatch.setattr(kind, "default_env", spy_default)
        monkeypatch.setattr(kind, "forced_env", spy_forced)
        sample = next(
            (s for s in samples if s.entry.get("external") is None and not s.entry.get("env")),
            samples[0],
        )
        if sample.entry.get("external") is not None:
            pytest.skip("every sample is external: nothing is launched, so no env")
        self._plan(kind_plugins, sample, kind_case)

        def settable(key: str) -> bool:
            return (
                env_name_problem(key) is None
                and not key.startswith("SRT_")
                and key not in DANGEROUS_ENV
            )

        env = dict(sample.entry.get("env") or {})
        overridden = {
            k: f"from-recipe-{i}"
            for i, k in enumerate(sorted(defaults))
            if settable(k) and k not in forced
        }
        env.update(overridden)
        env["KIT_RECIPE_ONLY"] = "from-recipe"
        owned = {k: "from-recipe" for k in forced if settable(k)}
        env.update(owned)
        forced.clear()
        plan = self._plan(kind_plugins, sample.with_entry(env=env), kind_case)
        unit = self._unit(plan, sample)
        for inst in unit.instances:
            assert inst.env.get("KIT_RECIPE_ONLY") == "from-recipe", (
                f"{inst.step}: the recipe's env did not reach the instance"
            )
            for key, value in overridden.items():
                assert inst.env.get(key) == value, (
                    f"{inst.step}: recipe env {key} must override default_env, got"
                    f" {inst.env.get(key)!r}"
                )
            for key in owned:
                won = inst.env.get(key) != "from-recipe" or forced.get(key) == "from-recipe"
                assert won, f"{inst.step}: forced_env {key} must win over the recipe"
        for key in owned:
            assert any(key in w for w in unit.warnings), (
                f"overriding forced_env {key} must be warned about; warnings: {unit.warnings}"
            )

    # ----------------------------------------------------------------- ports

    def test_listen_ports_are_in_the_ledger(
        self,
        kind_plugins: PluginSet,
        kind_case: KindCase,
        kind: ServiceKind,
        samples: list[kit.Sample],
    ) -> None:
        for sample in samples:
            loaded = kit.load(kind_plugins, sample.recipe)
            settled = next(s for s in loaded.services if s.name == sample.service)
            ports = list(kind.listen_ports(settled.spec, settled.options))
            for port in ports:
                assert isinstance(port, int), f"listen_ports must return ints, got {port!r}"
                assert not isinstance(port, bool), f"listen_ports returned a bool {port!r}"
                assert 1 <= port <= 65535, f"listen port {port} out of range"
            if settled.spec.external is not None:
                continue
            plan = self._plan(kind_plugins, sample, kind_case)
            unit = self._unit(plan, sample)
            ledger = {(e["node"], e["port"], e["step"]) for e in plan.ports}
            for inst in unit.instances:
                for port in ports:
                    assert port in inst.ports, f"{inst.step}: port {port} missing from its ports"
                    assert (inst.node, port, inst.step) in ledger, (
                        f"{inst.step}: listen port {port} is not in the plan's port ledger"
                    )

    # ----------------------------------------------------------------- placement

    def test_unknown_placement_is_refused(
        self, kind_plugins: PluginSet, samples: list[kit.Sample]
    ) -> None:
        sample = next((s for s in samples if s.entry.get("nodes") is None), None)
        if sample is None:
            pytest.skip("every sample owns a pool (`nodes`)")
        bad = sample.with_entry(placement={"node": "kit-no-such-placement"})
        self._refused(kind_plugins, bad, "kit-no-such-placement")

    def test_disallowed_placement_is_refused_naming_the_kind(
        self, kind_plugins: PluginSet, kind: ServiceKind, samples: list[kit.Sample]
    ) -> None:
        if kind.allowed_placements is None:
            pytest.skip("the kind accepts every placement")
        sample = next((s for s in samples if s.entry.get("nodes") is None), None)
        if sample is None:
            pytest.skip("every sample owns a pool (`nodes`)")
        others = sorted(set(kind_plugins.placements()) - set(kind.allowed_placements) - {"pool"})
        if not others:
            pytest.skip("every registered placement is allowed")
        for placement in others[:2]:
            bad = sample.with_entry(placement={"node": placement})
            self._refused(kind_plugins, bad, repr(kind.name), repr(placement))

    def test_allowed_placements_plan(
        self,
        kind_plugins: PluginSet,
        kind_case: KindCase,
        kind: ServiceKind,
        samples: list[kit.Sample],
    ) -> None:
        if kind.allowed_placements is None:
            pytest.skip("the kind accepts every placement")
        sample = next(
            (
                s
                for s in samples
                if s.entry.get("nodes") is None and s.entry.get("external") is None
            ),
            None,
        )
        if sample is None:
            pytest.skip("no launched, pool-less sample")
        for placement in sorted(kind.allowed_placements):
            if placement == "dedicated" and not kind.supports_dedicated:
                continue
            if placement == "pool":
                # a pool is ridden by naming its owner: add one that owns a node
                moved = sample.with_entry(placement={"pool": "kit-pool-owner"})
                moved.recipe["services"].insert(
                    0, {"name": "kit-pool-owner", "nodes": 1, "command": ["sleep", "1000"]}
                )
            else:
                moved = sample.with_entry(placement={"node": placement})
            errors = kit.recipe_errors(kind_plugins, moved.recipe)
            assert not errors, f"allowed placement {placement!r} is refused:\n" + "\n".join(errors)

    # ----------------------------------------------------------------- external / command

    def test_external_rules(
        self, kind_plugins: PluginSet, kind: ServiceKind, samples: list[kit.Sample]
    ) -> None:
        base = samples[0]
        entry = {"name": base.service, "type": kind.name}
        if kind.supports_external:
            # an address a sample writes, else a URL of the kind's first scheme: a kind
            # whose external is no URL (the Mooncake master's host:port) gives a sample
            written = next((s.entry["external"] for s in samples if s.entry.get("external")), None)
            scheme = kind.external_schemes[0] if kind.external_schemes else "http"
            sample = base.with_entry(**{k: None for k in base.entry if k not in entry})
            sample = sample.with_entry(external=written or f"{scheme}://192.0.2.10:1234")
            errors = kit.recipe_errors(kind_plugins, sample.recipe)
            assert not errors, "an external instance is refused:\n" + "\n".join(errors)
        else:
            sample = base.with_entry(external="http://192.0.2.10:1234")
            self._refused(kind_plugins, sample, f"type {kind.name!r} does not support external")

    def test_command_rules(
        self, kind_plugins: PluginSet, kind: ServiceKind, samples: list[kit.Sample]
    ) -> None:
        base = samples[0]
        if kind.requires_command:
            self._refused(kind_plugins, base.with_entry(command=None), "is required")
        if kind.forbids_command:
            self._refused(kind_plugins, base.with_entry(command=["true"]), "builds its own command")


# =========================================================================== probes


@dataclass
class ProbeCase:
    """A probe class, configs it accepts (as written under ``readiness:``), its plugin."""

    probe: type[Probe]
    configs: Sequence[Mapping[str, Any]] = ()
    plugin: object | None = None

    def sample_configs(self) -> list[dict[str, Any]]:
        if self.configs:
            return [dict(c) for c in self.configs]
        return [{"port": 9999}] if self.probe.uses_port else [{}]


class ProbeContract:
    """The shared suite for a readiness probe; override :meth:`probe_case`."""

    @pytest.fixture
    def probe_case(self) -> ProbeCase:
        """Override: return a :class:`ProbeCase` for the probe under test."""
        pytest.fail(f"{type(self).__name__} does not override the probe_case fixture")

    @pytest.fixture
    def probe_plugins(self, probe_case: ProbeCase) -> PluginSet:
        return _case_plugins(probe_case.plugin, kit.ClassesPlugin(probes=[probe_case.probe]))

    def _recipe(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "services": [
                {
                    "name": "probed",
                    "command": ["python3", "-m", "http.server", "9999"],
                    "readiness": {name: copy.deepcopy(dict(config))},
                }
            ]
        }

    def test_registered(self, probe_plugins: PluginSet, probe_case: ProbeCase) -> None:
        assert isinstance(probe_plugins.probe(probe_case.probe.name), probe_case.probe)
        _assert_one_line_summary(probe_case.probe.summary, "probe")

    def test_config_model_is_closed(self, probe_plugins: PluginSet, probe_case: ProbeCase) -> None:
        name = probe_case.probe.name
        config = {**probe_case.sample_configs()[0], "kit_no_such_key": 1}
        errors = kit.recipe_errors(probe_plugins, self._recipe(name, config))
        assert any("kit_no_such_key" in e for e in errors), errors

    def test_samples_plan(self, probe_plugins: PluginSet, probe_case: ProbeCase) -> None:
        name = probe_case.probe.name
        for config in probe_case.sample_configs():
            plan = kit.plan(probe_plugins, self._recipe(name, config))
            inst = plan.unit("probed").instances[0]
            assert inst.readiness is not None
            assert inst.readiness.probe == name
            json.dumps(inst.readiness.config)
            assert isinstance(inst.readiness.describe, str)
            assert inst.readiness.describe
            for text in _strings(inst.readiness.config):
                assert not unrendered(text), f"unrendered placeholder in {text!r}"
            if probe_case.probe.uses_port:
                assert isinstance(inst.readiness.config.get("port"), int)


# =========================================================================== placements


@dataclass
class PlacementCase:
    """A placement class and its plugin."""

    placement: type[Placement]
    plugin: object | None = None


class PlacementContract:
    """The shared suite for a placement resolver; override :meth:`placement_case`."""

    @pytest.fixture
    def placement_case(self) -> PlacementCase:
        """Override: return a :class:`PlacementCase` for the placement under test."""
        pytest.fail(f"{type(self).__name__} does not override the placement_case fixture")

    @pytest.fixture
    def placement_plugins(self, placement_case: PlacementCase) -> PluginSet:
        stand_in = kit.ClassesPlugin(placements=[placement_case.placement])
        return _case_plugins(placement_case.plugin, stand_in)

    def test_registered(self, placement_plugins: PluginSet, placement_case: PlacementCase) -> None:
        found = placement_plugins.placement(placement_case.placement.name)
        assert isinstance(found, placement_case.placement)
        _assert_one_line_summary(placement_case.placement.summary, "placement")

    @pytest.mark.parametrize(("nodes", "per_node"), [(1, 1), (2, 1), (3, 2)])
    def test_selects_nodes_of_the_layout(
        self,
        placement_plugins: PluginSet,
        placement_case: PlacementCase,
        nodes: int,
        per_node: int,
    ) -> None:
        placement = placement_plugins.placement(placement_case.placement.name)
        layout = kit.fake_layout(nodes=nodes, workers_per_node=per_node)
        chosen = placement.nodes(layout)
        assert isinstance(chosen, tuple)
        names = [n.name for n in chosen]
        assert len(names) == len(set(names)), f"a node is selected twice: {names}"
        index = {n.name: n.index for n in layout.nodes}
        assert all(n in index for n in names), f"selects nodes outside the layout: {names}"
        assert [index[n] for n in names] == sorted(index[n] for n in names), (
            f"nodes must be in allocation order: {names}"
        )
        if placement.single_node:
            assert len(chosen) == 1, "single_node placements select exactly one node"

    def test_a_service_placed_there_dry_runs(
        self, placement_plugins: PluginSet, placement_case: PlacementCase
    ) -> None:
        name = placement_case.placement.name
        recipe = {
            **copy.deepcopy(JOB_WITH_WORKERS),
            "services": [
                {
                    "name": "placed",
                    "command": ["python3", "-c", "print('{node}')"],
                    "placement": {"node": name},
                }
            ],
        }
        from srt_services.recipe.problems import RecipeError

        try:
            plan = kit.plan(placement_plugins, recipe)
        except RecipeError as exc:
            if "selects no" in str(exc):
                return
            raise
        unit = plan.unit("placed")
        assert unit.placement == name


# --------------------------------------------------------------------------- engines


@dataclass(slots=True)
class EngineCase:
    """An engine class, its plugin, and sample recipes it must build.

    Each recipe is a whole schema-2 recipe (mapping) whose frontend type is the engine's
    and whose roles (and frontend) write no command: the engine builds them. ``backends``
    lists ``engine.type`` values the samples cover (every one the engine claims, ideally).
    """

    engine: type[Engine]
    recipes: Sequence[Mapping[str, Any]]
    plugin: object | None = None
    plugin_name: str | None = None


class EngineContract:
    """The shared suite every engine must pass: subclass it and override ``engine_case``."""

    @pytest.fixture
    def engine_case(self) -> EngineCase:  # pragma: no cover - always overridden
        raise NotImplementedError("override the engine_case fixture")

    @pytest.fixture
    def engine_plugins(self, engine_case: EngineCase) -> PluginSet:
        plugin = engine_case.plugin or kit.ClassesPlugin(engines=[engine_case.engine])
        return kit.isolated_plugins(plugin, engine_case.plugin_name)

    def _plans(self, plugins: PluginSet, case: EngineCase) -> Iterator[tuple[int, Plan]]:
        for i, recipe in enumerate(case.recipes):
            try:
                yield i, kit.plan(plugins, dict(recipe), source=f"engine-sample-{i}.yaml")
            except Exception as exc:  # the message names the sample, then re-raises
                raise AssertionError(f"sample recipe {i} does not plan: {exc}") from exc

    def test_registered_with_its_name(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        name = engine_case.engine.name
        assert isinstance(name, str), "an engine needs a class attribute `name`"
        assert name, "an engine's `name` must not be empty"
        assert engine_plugins.has("engine", name)
        assert engine_case.engine.summary, "one line for `srt kinds` and the docs"

    def test_backends_are_engine_types(self, engine_case: EngineCase) -> None:
        from srt_services.recipe.models import BACKENDS

        unknown = sorted(set(engine_case.engine.backends) - set(BACKENDS))
        assert not unknown, f"backends {unknown} are not engine.type values ({BACKENDS})"

    def test_options_model_is_closed(self, engine_case: EngineCase) -> None:
        extra = engine_case.engine.Options.model_config.get("extra")
        assert extra == "forbid", "engine.options must refuse unknown keys (subclass KindOptions)"

    def test_samples_cover_the_frontend_type(self, engine_case: EngineCase) -> None:
        assert engine_case.recipes, "give at least one sample recipe"
        for i, recipe in enumerate(engine_case.recipes):
            front = recipe.get("frontend") or {}
            assert front.get("type") == engine_case.engine.name, (
                f"sample {i}: frontend.type must be {engine_case.engine.name!r}"
            )

    def test_every_worker_and_the_frontend_is_built(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        for i, plan in self._plans(engine_plugins, engine_case):
            workers = [u for u in plan.units if u.category == "workers"]
            assert workers, f"sample {i}: no worker unit"
            for unit in workers:
                for inst in unit.instances:
                    assert inst.argv, f"sample {i}: {inst.step} has no command"
            recipe = kit.load(engine_plugins, dict(engine_case.recipes[i])).recipe
            fronts = [u for u in plan.units if u.category == "frontend"]
            if engine_case.engine().runs_frontend_for(recipe):
                assert fronts, f"sample {i}: no frontend unit"
                for front in fronts:  # the frontend, its replicas and their balancer
                    for inst in front.instances:
                        assert inst.argv, f"sample {i}: {inst.step} has no command"
            else:
                assert not fronts, f"sample {i}: the engine runs no frontend, yet one is planned"

    def test_nothing_is_left_unrendered(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        for i, plan in self._plans(engine_plugins, engine_case):
            for unit in plan.units:
                if unit.category not in ("workers", "frontend"):
                    continue
                for inst in unit.instances:
                    parts = [
                        *inst.argv,
                        *inst.env.values(),
                        inst.preamble or "",
                        *inst.files.values(),
                    ]
                    left = [name for text in parts for name in unrendered(text)]
                    assert not left, f"sample {i}: {inst.step} leaves {left} unrendered"

    def test_ports_are_in_the_ledger(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        """Every port a built process listens on is claimed, so two that collide on a node
        are refused before anything starts."""
        for i, plan in self._plans(engine_plugins, engine_case):
            claimed = {(p["node"], p["port"]) for p in plan.ports}
            for unit in plan.units:
                for inst in unit.instances:
                    missing = [p for p in inst.ports if (inst.node, p) not in claimed]
                    assert not missing, f"sample {i}: {inst.step} ports {missing} unclaimed"

    def test_plan_is_json_and_round_trips(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        from srt_services.contracts.plan import Plan as PlanModel

        for _, plan in self._plans(engine_plugins, engine_case):
            blob = plan.to_json()
            json.loads(blob)
            assert PlanModel.from_json(blob) == plan

    def test_a_hand_written_command_wins(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        recipe = copy.deepcopy(dict(engine_case.recipes[0]))
        role = next(iter(recipe["roles"]))
        recipe["roles"][role]["command"] = ["my-worker", "--custom"]
        recipe["roles"][role].pop("config", None)
        plan = kit.plan(engine_plugins, recipe, source="engine-command.yaml")
        unit = next(u for u in plan.units if u.name == role)
        assert unit.instances[0].argv[:2] == ["my-worker", "--custom"]

    def test_unknown_option_is_refused_naming_the_engine(
        self, engine_plugins: PluginSet, engine_case: EngineCase
    ) -> None:
        recipe = copy.deepcopy(dict(engine_case.recipes[0]))
        recipe.setdefault("engine", {}).setdefault("options", {})["no_such_setting_x"] = 1
        errors = kit.recipe_errors(engine_plugins, recipe, source="engine-option.yaml")
        text = "\n".join(errors)
        assert "engine.options.no_such_setting_x" in text, text
        assert engine_case.engine.name in text, text
