"""The plugin-author kit: fixtures, helpers and the contract suites (run on built-ins here,
and as a plugin author runs them, in a separate pytest process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from plugin_site import Site
from srt_services.errors import PluginError
from srt_services.hookspecs import hookimpl
from srt_services.kinds.generic import GenericKind
from srt_services.plan.placements import All, Head
from srt_services.plugins.manager import PluginSet, UnknownName
from srt_services.probes.http import HttpProbe
from srt_services.probes.tcp import TcpProbe
from srt_services.testing import kit
from srt_services.testing.contracts import (
    KindCase,
    PlacementCase,
    PlacementContract,
    ProbeCase,
    ProbeContract,
    ServiceKindContract,
)

# --------------------------------------------------------------------------- contracts on built-ins


class TestGenericKindContract(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            GenericKind,
            entries=[
                {"command": ["server", "--bind", "{node_ip}:9000"], "readiness": {"port": 9000}},
                {"command": ["agent", "{node}"], "placement": {"node": "all"}, "env": {"A": "1"}},
            ],
            recipe={},
        )


class TestHeadPlacementContract(PlacementContract):
    @pytest.fixture
    def placement_case(self) -> PlacementCase:
        return PlacementCase(Head)


class TestAllPlacementContract(PlacementContract):
    @pytest.fixture
    def placement_case(self) -> PlacementCase:
        return PlacementCase(All)


class TestTcpProbeContract(ProbeContract):
    @pytest.fixture
    def probe_case(self) -> ProbeCase:
        return ProbeCase(TcpProbe)


class TestHttpProbeContract(ProbeContract):
    @pytest.fixture
    def probe_case(self) -> ProbeCase:
        return ProbeCase(HttpProbe, configs=[{"port": 8080, "path": "/ready", "status": 204}])


# --------------------------------------------------------------------------- fixtures and helpers


class EchoKind(GenericKind):
    name: ClassVar[str] = "echo"
    summary: ClassVar[str] = "test kind"


class RecipeHooks:
    @hookimpl
    def srt_register_service_kinds(self) -> list[type[Any]]:
        return [EchoKind]

    @hookimpl
    def srt_validate_recipe(self, recipe: Any) -> list[Any]:
        return []


def test_isolated_set_ignores_installed_plugins(site: Site, srt_plugins: PluginSet) -> None:
    site.install("good")
    assert srt_plugins.records == []
    with pytest.raises(UnknownName):
        srt_plugins.kind("good-kind")
    assert site.imported() == []


def test_register_for_one_test_and_hook_recorder(
    srt_plugins: PluginSet,
    srt_register: Callable[..., str],
    srt_hook_recorder: kit.HookRecorder,
    srt_plan: Callable[..., Any],
) -> None:
    name = srt_register(RecipeHooks(), "recipe-hooks")
    assert srt_plugins.owner("kind", "echo") == name
    srt_hook_recorder.assert_called("srt_register_service_kinds", plugin=name)
    srt_hook_recorder.clear()
    plan = srt_plan({"services": [{"name": "e", "type": "echo", "command": ["echo", "{node}"]}]})
    assert plan.unit("e").instances[0].argv == ["echo", "node0"]
    srt_hook_recorder.assert_called("srt_validate_recipe", times=1, plugin=name)
    srt_hook_recorder.assert_not_called("srt_register_probes")
    call = srt_hook_recorder.calls_of("srt_validate_recipe")[0]
    assert call.result == [[]]  # pluggy's list: one implementation answered with no problems
    assert "recipe" in call.kwargs


def test_registered_context_undoes_even_on_failure(srt_plugins: PluginSet) -> None:
    with pytest.raises(RuntimeError), kit.registered(srt_plugins, RecipeHooks(), "tmp"):
        assert srt_plugins.has("kind", "echo")
        raise RuntimeError("test body failed")
    assert not srt_plugins.has("kind", "echo")
    # Registering again works: nothing of the first registration is left.
    with kit.registered(srt_plugins, RecipeHooks(), "tmp"):
        assert srt_plugins.kind("echo").name == "echo"


def test_unregister_one_of_two_clashing_plugins_keeps_the_other(srt_plugins: PluginSet) -> None:
    class OtherEcho(GenericKind):
        name: ClassVar[str] = "echo"

    srt_plugins.register(RecipeHooks(), "a")
    srt_plugins.register(kit.ClassesPlugin([OtherEcho]), "b")
    with pytest.raises(PluginError, match="both a and b"):
        srt_plugins.kind("echo")
    srt_plugins.unregister("a")
    assert isinstance(srt_plugins.kind("echo"), OtherEcho)


def test_unmarked_hook_is_refused(srt_plugins: PluginSet) -> None:
    class Forgot:
        def srt_register_service_kinds(self) -> list[type[Any]]:
            return [EchoKind]

    with pytest.raises(PluginError, match="without @hookimpl"):
        srt_plugins.register(Forgot(), "forgot")


def test_fake_allocation_layout_and_context() -> None:
    alloc = kit.fake_allocation(3)
    assert [n.ip for n in alloc.nodes] == ["<node0-ip>", "<node1-ip>", "<node2-ip>"]
    assert kit.fake_allocation(2, kind="local").nodes[1].ip == "127.0.0.2"
    layout = kit.fake_layout(nodes=2, workers_per_node=2)
    assert len(layout.workers) == 4
    assert layout.head.name == "node0"
    ctx = kit.instance_context("svc", layout, node=1)
    assert ctx.node.name == "node1"
    assert ctx.values["node_ip"] == "<node1-ip>"
    assert ctx.work_dir == "<job_dir>/work/service_svc"
    spec = kit.service_spec({"name": "x", "command": ["a"]})
    assert GenericKind().command(spec, None, ctx) is None


def test_recipe_errors_helper(srt_plugins: PluginSet) -> None:
    errors = kit.recipe_errors(srt_plugins, {"services": [{"name": "x", "type": "nope"}]})
    assert len(errors) == 1
    assert "services[x].type: service type 'nope' is not known" in errors[0]


# --------------------------------------------------------------------------- as an author runs it

AUTHOR_CONFTEST = 'pytest_plugins = ["srt_services.testing.pytest_plugin"]\n'

AUTHOR_TESTS = """
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from srt_services import hookimpl
from srt_services.extend.kind import KindOptions, ServiceKind
from srt_services.testing.contracts import KindCase, ServiceKindContract


class GoodOptions(KindOptions):
    port: int = 7070


class GoodKind(ServiceKind):
    name: ClassVar[str] = "goodk"
    summary: ClassVar[str] = "a good kind"
    Options: ClassVar[type[BaseModel]] = GoodOptions
    allowed_placements: ClassVar[frozenset[str] | None] = frozenset({"head", "all", "pool"})

    def command(self, spec: Any, options: Any, ctx: Any) -> list[str]:
        return ["serve", "--host", "{node_ip}", "--port", str(options.port)]

    def default_env(self, spec: Any, options: Any, ctx: Any) -> dict[str, str]:
        return {"GOOD_LEVEL": "info"}

    def forced_env(self, spec: Any, options: Any, ctx: Any) -> dict[str, str]:
        return {"GOOD_NODE": "{node}"}

    def listen_ports(self, spec: Any, options: Any) -> list[int]:
        return [options.port]


class LooseOptions(BaseModel):
    port: int = 7071


class BadKind(GoodKind):
    name: ClassVar[str] = "badk"
    Options: ClassVar[type[BaseModel]] = LooseOptions

    def command(self, spec: Any, options: Any, ctx: Any) -> list[str]:
        return ["serve", "{{node_ip}}"]

    def listen_ports(self, spec: Any, options: Any) -> list[int]:
        return [70000]


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    return [GoodKind, BadKind]


class TestGood(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        import test_author

        return KindCase(GoodKind, entries=[{}, {"options": {"port": 7171}}], plugin=test_author)


class TestBad(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(BadKind)


def test_fixtures(srt_register: Any, srt_plan: Any) -> None:
    import test_author

    srt_register(test_author)
    plan = srt_plan({"services": [{"name": "g", "type": "goodk"}]}, nodes=2)
    assert plan.unit("g").instances[0].argv[2] == "<node0-ip>"
"""


def test_contract_suite_as_a_plugin_author_runs_it(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(AUTHOR_CONFTEST)
    (tmp_path / "test_author.py").write_text(textwrap.dedent(AUTHOR_TESTS))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rf",
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout
    failed = sorted(
        line.split("::")[2].split(" ")[0] for line in out.splitlines() if line.startswith("FAILED")
    )
    assert all("TestBad" in line for line in out.splitlines() if line.startswith("FAILED")), out
    assert failed == [
        "test_dry_run_renders_everything",
        "test_listen_ports_are_in_the_ledger",
        "test_options_model_is_closed",
        "test_unknown_option_is_refused_naming_the_kind",
    ], out
    assert "the options model must refuse unknown keys" in out
    assert "listen port 70000 out of range" in out
    assert "still holds {node_ip} after rendering" in out
    assert result.returncode == 1
