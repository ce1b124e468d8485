"""No implied service is dropped in silence: every setting that implies a service is refused
at its line when no plugin provides the kind, and accepted once one does.

Each test builds its own isolated plugin set (built-ins only, autoload off): "without" is
that set; "with" adds a stand-in plugin that registers a kind of the implied name, which is
all the rule asks for (the real plugins' own tests check what they imply). Site rules that
block an installed plugin: ``core/tests/plugins/test_implied_blocked.py``.
"""

from __future__ import annotations

import textwrap
from typing import ClassVar

import pytest
from srt_services.extend import ServiceKind
from srt_services.testing import LoadedRecipe, LocatedProblem, PluginSet, RecipeError, kit
from srt_services.testing.kit import ClassesPlugin, isolated_plugins

SOURCE = "recipe.yaml"


def standin_kinds(*names: str) -> ClassesPlugin:
    """A plugin that registers kinds of these names and nothing else."""
    kinds = []
    for name in names:

        class Kind(ServiceKind):
            summary: ClassVar[str] = "stand-in"

        Kind.name = name
        kinds.append(Kind)
    return ClassesPlugin(kinds=kinds)


def with_kinds(*names: str) -> PluginSet:
    plugins = isolated_plugins()
    plugins.register(standin_kinds(*names), "standin")
    return plugins


def load(plugins: PluginSet, text: str) -> LoadedRecipe:
    return kit.load(plugins, text, SOURCE)


def errors(plugins: PluginSet, text: str) -> list[LocatedProblem]:
    with pytest.raises(RecipeError) as info:
        load(plugins, text)
    return info.value.errors


def only_error(plugins: PluginSet, text: str) -> LocatedProblem:
    found = errors(plugins, text)
    assert len(found) == 1, "\n".join(p.render(SOURCE) for p in found)
    return found[0]


#: A vLLM job with a decode role; metrics off, so only the setting under test implies.
VLLM_JOB = """
schema: 2
name: t
engine: {type: vllm%s}
observability: {metrics: false}
frontend: {type: vllm, command: [f]}
roles:
  decode: {command: [w]%s}
"""


def vllm_job(engine: str = "", role: str = "", tail: str = "") -> str:
    return VLLM_JOB % (engine, role) + textwrap.dedent(tail).lstrip("\n")


# --------------------------------------------------------------------------- frontend, planes


def test_dynamo_frontend_without_etcd() -> None:
    p = only_error(
        isolated_plugins(),
        """
        schema: 2
        name: t
        observability: {metrics: false}
        frontend: {type: dynamo, command: [f]}
        """,
    )
    assert p.label == "frontend.type"
    assert (p.line, p.column) == (4, 12)
    assert p.message == (
        "dynamo implies the etcd service, whose kind srt-etcd provides, but"
        " srt-etcd is not installed: pip install 'srt-services[etcd]', or declare"
        " `{name: etcd, enabled: false}` under services (Dynamo then needs ETCD_ENDPOINTS from"
        " elsewhere)"
    )


def test_dynamo_frontend_by_default_is_located_at_the_frontend() -> None:
    p = only_error(
        isolated_plugins(),
        "schema: 2\nname: t\nobservability: {metrics: false}\nfrontend: {command: [f]}\n",
    )
    assert (p.label, p.line) == ("frontend.type", 4)
    assert p.message.startswith("dynamo (the default frontend type) implies the etcd service")


def test_dynamo_frontend_with_etcd_installed_or_switched_off() -> None:
    text = "schema: 2\nname: t\nobservability: {metrics: false}\nfrontend: {command: [f]}\n"
    assert load(with_kinds("etcd"), text).recipe.frontend_type == "dynamo"
    switched_off = text + "services:\n  - {name: etcd, enabled: false}\n"
    assert load(isolated_plugins(), switched_off).services == []


def test_a_declared_etcd_entry_is_reported_as_its_own_type_not_twice() -> None:
    p = only_error(
        isolated_plugins(),
        """
        schema: 2
        name: t
        observability: {metrics: false}
        frontend: {command: [f]}
        services:
          - {name: registry, type: etcd}
        """,
    )
    assert p.label == "services[registry].type"
    assert "provided by srt-etcd, which is not installed" in p.message


@pytest.mark.parametrize(
    ("plane", "value", "default"),
    [("request_plane", "nats", "tcp"), ("event_plane", "nats", "zmq")],
)
def test_nats_plane_without_nats(plane: str, value: str, default: str) -> None:
    text = f"""
    schema: 2
    name: t
    observability: {{metrics: false}}
    frontend: {{type: vllm, command: [f]}}
    dynamo:
      {plane}: {value}
    """
    p = only_error(isolated_plugins(), text)
    assert p.label == f"dynamo.{plane}"
    assert (p.line, p.column) == (6, 3)
    assert p.message == (
        "nats implies the nats service, whose kind srt-nats provides, but"
        f" srt-nats is not installed: pip install 'srt-services[nats]', or set"
        f" dynamo.{plane}: {default}"
    )
    assert load(with_kinds("nats"), text).recipe.dynamo.model_dump()[plane] == "nats"


def test_both_nats_planes_are_each_reported() -> None:
    found = errors(
        isolated_plugins(),
        """
        schema: 2
        name: t
        observability: {metrics: false}
        frontend: {type: vllm, command: [f]}
        dynamo: {request_plane: nats, event_plane: nats}
        """,
    )
    assert [p.label for p in found] == ["dynamo.request_plane", "dynamo.event_plane"]


# --------------------------------------------------------------------------- connectors


def test_lmcache_mp_on_a_role_without_srt_lmcache() -> None:
    p = only_error(isolated_plugins(), vllm_job(role=", connector: lmcache-mp"))
    assert p.label == "roles.decode.connector"
    assert (p.line, p.column) == (7, 26)
    assert p.message == (
        "lmcache-mp implies the lmcache-server service, whose kind"
        " srt-lmcache provides, but srt-lmcache is not installed: pip install srt-lmcache, or"
        " declare `{name: lmcache-server, enabled: false}` under services (the workers then"
        " need a server they reach on their own)"
    )


def test_lmcache_mp_on_the_engine_without_srt_lmcache() -> None:
    p = only_error(isolated_plugins(), vllm_job(engine=", connector: lmcache-mp"))
    assert p.label == "engine.connector"
    assert p.line == 3
    assert p.message.startswith("lmcache-mp implies the lmcache-server service")
    assert "pip install srt-lmcache" in p.message


def test_lmcache_mp_accepted_with_the_kind_switched_off_or_replaced() -> None:
    assert load(with_kinds("lmcache-server"), vllm_job(role=", connector: lmcache-mp"))
    off = vllm_job(
        role=", connector: lmcache-mp",
        tail="services:\n  - {name: lmcache-server, enabled: false}\n",
    )
    assert load(isolated_plugins(), off).services == []
    # a declared server of another name is checked as its own type (one error, there)
    declared = vllm_job(
        role=", connector: lmcache-mp",
        tail="services:\n  - {name: cache, type: lmcache-server}\n",
    )
    p = only_error(isolated_plugins(), declared)
    assert p.label == "services[cache].type"


def test_an_entry_that_changes_a_missing_implied_service_adds_no_generic_complaints() -> None:
    # the entry tunes the implied server; without the plugin it is not a generic service
    # missing its command and understanding no options: the one problem is the plugin
    text = vllm_job(
        role=", connector: lmcache-mp",
        tail="services:\n  - {name: lmcache-server, options: {l1_size_gb: 1}}\n",
    )
    p = only_error(isolated_plugins(), text)
    assert p.label == "roles.decode.connector"
    assert "pip install srt-lmcache" in p.message


def test_a_role_can_opt_out_of_the_engine_connector() -> None:
    text = vllm_job(engine=", connector: lmcache-mp", role=", connector: none")
    loaded = load(isolated_plugins(), text)
    assert loaded.recipe.role_connector("decode") is None


@pytest.mark.parametrize("connector", ["nixl", "lmcache", "mooncake", "none"])
def test_connectors_that_imply_nothing(connector: str) -> None:
    loaded = load(isolated_plugins(), vllm_job(role=f", connector: {connector}"))
    assert loaded.services == []


def test_unknown_connector_lists_the_known_ones() -> None:
    p = only_error(isolated_plugins(), vllm_job(role=", connector: lmcache_mp"))
    assert p.label == "roles.decode.connector"
    assert p.message == (
        "must be one of none, nixl, lmcache, lmcache-mp, mooncake; got 'lmcache_mp'"
    )


def test_connector_on_another_engine_is_refused() -> None:
    text = vllm_job(role=", connector: lmcache-mp").replace("type: vllm}", "type: sglang}")
    p = only_error(isolated_plugins(), text)
    assert p.label == "roles.decode.connector"
    assert p.message == (
        "connector lmcache-mp is a vLLM KV connector, but engine.type is sglang: remove it;"
        " SGLang workers use an LMCache server through `--enable-lmcache` and a declared"
        " lmcache-server service"
    )


# --------------------------------------------------------------------------- failover


def test_failover_without_srt_gms() -> None:
    p = only_error(isolated_plugins(), vllm_job(engine=", failover: true"))
    assert p.label == "engine.failover"
    assert (p.line, p.column) == (3, 22)
    assert p.message == (
        "true implies the gms service, whose kind srt-gms provides, but"
        " srt-gms is not installed: pip install srt-gms, or set engine.failover: false"
    )
    assert load(with_kinds("gms"), vllm_job(engine=", failover: true"))
    off = vllm_job(engine=", failover: true", tail="services:\n  - {name: gms, enabled: false}\n")
    assert load(isolated_plugins(), off).services == []


# --------------------------------------------------------------------------- metrics

METRICS_KINDS = ("node-exporter", "dcgm-exporter", "process-exporter", "prometheus")
NO_FRONTEND = "schema: 2\nname: t\n"
DEFAULT_WARNING = (
    "observability.metrics is on by default but srt-exporters is not installed: the job runs"
    " without exporters and Prometheus; pip install 'srt-services[exporters]', or set"
    " observability.metrics: false"
)


def test_metrics_written_true_without_srt_exporters() -> None:
    p = only_error(isolated_plugins(), NO_FRONTEND + "observability:\n  metrics: true\n")
    assert p.label == "observability.metrics"
    assert (p.line, p.column) == (4, 3)
    assert p.message == (
        "true implies the node-exporter, dcgm-exporter, process-exporter"
        " and prometheus services, whose kinds srt-exporters provides, but srt-exporters is not"
        " installed: pip install 'srt-services[exporters]', or set observability.metrics: false"
    )


def test_metrics_by_default_without_srt_exporters_is_a_warning_at_the_top() -> None:
    loaded = load(isolated_plugins(), NO_FRONTEND)
    (w,) = loaded.warnings
    assert (w.label, w.line, w.column, w.message) == ("", 1, 1, DEFAULT_WARNING)


def test_tuning_the_default_prometheus_without_srt_exporters_is_an_error_at_the_entry() -> None:
    # the default only warns, but an entry that tunes Prometheus asks for it
    text = NO_FRONTEND + "services:\n  - {name: prometheus, options: {retention: 1d}}\n"
    with pytest.raises(RecipeError) as info:
        load(isolated_plugins(), text)
    (p,) = info.value.errors
    assert (p.label, p.line) == ("services[prometheus].name", 4)
    assert p.message.startswith(
        "changes the implied prometheus service, whose kind srt-exporters provides, but"
        " srt-exporters is not installed"
    )
    assert [w.message for w in info.value.problems if w.warning] == [DEFAULT_WARNING]


def test_metrics_by_default_is_located_at_observability_when_written() -> None:
    loaded = load(isolated_plugins(), NO_FRONTEND + "observability: {}\n")
    (w,) = loaded.warnings
    assert (w.label, w.line, w.message) == ("observability", 3, DEFAULT_WARNING)


def test_metrics_with_srt_exporters_or_off() -> None:
    assert load(with_kinds(*METRICS_KINDS), NO_FRONTEND).warnings == []
    written = NO_FRONTEND + "observability: {metrics: true}\n"
    assert load(with_kinds(*METRICS_KINDS), written).warnings == []
    assert (
        load(isolated_plugins(), NO_FRONTEND + "observability: {metrics: false}\n").warnings == []
    )


def test_metrics_names_only_the_kinds_still_needed() -> None:
    text = (
        NO_FRONTEND + "observability: {metrics: true}\nservices:\n"
        "  - {name: prometheus, enabled: false}\n"
    )
    p = only_error(with_kinds("node-exporter"), text)
    assert p.message.startswith(
        "true implies the dcgm-exporter and process-exporter services,"
        " whose kinds srt-exporters provides, but srt-exporters is not installed"
    )


def test_every_implying_setting_at_once_reports_each_at_its_line() -> None:
    text = """
    schema: 2
    name: t
    engine: {type: vllm, failover: true, connector: lmcache-mp}
    dynamo: {request_plane: nats}
    observability: {metrics: true}
    frontend: {command: [f]}
    roles:
      decode: {command: [w]}
    """
    found = errors(isolated_plugins(), text)
    assert [(p.label, p.line) for p in found] == [
        ("engine.failover", 3),
        ("engine.connector", 3),
        ("dynamo.request_plane", 4),
        ("observability.metrics", 5),
        ("frontend.type", 6),
    ]
    # each names its own plugin
    for p, dist in zip(
        found, ["srt-gms", "srt-lmcache", "srt-nats", "srt-exporters", "srt-etcd"], strict=True
    ):
        assert f"{dist} is not installed" in p.message


def test_the_reference_table_lists_what_the_rule_checks() -> None:
    from srt_services.checking.rules.implied_kinds import IMPLYING_SETTINGS, implications

    text = """
    schema: 2
    name: t
    engine: {type: vllm, failover: true, connector: lmcache-mp}
    dynamo: {request_plane: nats, event_plane: nats}
    frontend: {command: [f]}
    roles:
      decode: {command: [w]}
    """
    every = {k for row in IMPLYING_SETTINGS for k in row.kinds}
    recipe = load(with_kinds(*every), text).recipe
    assert {k for imp in implications(recipe) for k in imp.kinds} == every
