"""The plugin-author kit: fixtures, helpers and the contract suites (run on built-ins here,
and as a plugin author runs them, in a separate pytest process)."""

from __future__ import annotations

import os
import socket
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
from srt_services.recipe.problems import RecipeError
from srt_services.testing import kit, needs
from srt_services.testing.contracts import (
    KindCase,
    PlacementCase,
    PlacementContract,
    ProbeCase,
    ProbeContract,
    ServiceKindContract,
)
from srt_services.testing.jobs import run_venv_srt

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


# --------------------------------------------------------------------------- settings, loader, ports


class TestKitSettingsOverride:
    """What a plugin's conftest.py does: one override, and every fixture follows it."""

    @pytest.fixture
    def srt_kit_settings(self) -> kit.KitSettings:
        return kit.KitSettings(
            kit.ClassesPlugin([EchoKind]),
            "echo-plugin",
            "recipe.yaml",
            local=True,
            job_dir="/jobs/j",
            fill={"observability": {"metrics": False}},
        )

    def test_the_plugin_is_in_every_plugin_set(self, srt_plugins: PluginSet) -> None:
        assert srt_plugins.owner("kind", "echo") == "echo-plugin"

    def test_load_dedents_names_the_source_and_fills_after_the_last_line(
        self, srt_load: Callable[..., Any]
    ) -> None:
        text = """
            schema: 2
            name: s
            services:
              - {name: e, type: echo, command: [x], bogus: 1}
            """
        with pytest.raises(RecipeError) as info:
            srt_load(text)
        (line,) = [p.render(info.value.source) for p in info.value.errors]
        # line 4: the text starts on the line after the quotes (its leading newline is dropped)
        assert line.startswith("recipe.yaml:4:41: services[e].bogus: unknown key"), line
        loaded = srt_load(text.replace(", bogus: 1", ""))
        assert loaded.warnings == [], "the filled-in metrics: false keeps the exporters warning out"
        assert loaded.recipe.observability.metrics is False

    def test_a_mapping_is_filled_too(self, srt_load: Callable[..., Any]) -> None:
        loaded = srt_load({"services": [{"name": "e", "command": ["x"]}]})
        assert loaded.warnings == []
        assert loaded.recipe.observability.metrics is False

    def test_plan_defaults_come_from_the_settings(self, srt_plan: Callable[..., Any]) -> None:
        recipe = {"services": [{"name": "e", "type": "echo", "command": ["echo", "{job_dir}"]}]}
        (inst,) = srt_plan(recipe).unit("e").instances
        assert (inst.node_ip, inst.argv) == ("127.0.0.1", ["echo", "/jobs/j"])
        (inst,) = srt_plan(recipe, local=False, job_dir="/elsewhere").unit("e").instances
        assert (inst.node_ip, inst.argv) == ("<node0-ip>", ["echo", "/elsewhere"])


def test_isolated_plugins_with_a_plugin(srt_plugins: PluginSet) -> None:
    assert not srt_plugins.has("kind", "echo"), "the default settings register nothing"
    plugins = kit.isolated_plugins(RecipeHooks(), "hooks")
    assert plugins.owner("kind", "echo") == "hooks"


def test_recipe_text_fill() -> None:
    fill = {"observability": {"metrics": False}}
    assert (
        kit.recipe_text("  a: 1\n  b: 2", fill) == "a: 1\nb: 2\nobservability: {metrics: false}\n"
    )
    assert kit.recipe_text("observability:\n  metrics: true\n", fill) == (
        "observability:\n  metrics: true\n"
    )
    assert "observability: {metrics: false}" in kit.recipe_text("a:\n  observability: 1\n", fill)


def test_a_recipe_file_is_loaded_and_planned_from_disk(
    tmp_path: Path,
    srt_load: Callable[..., Any],
    srt_plan: Callable[..., Any],
    srt_problems: Callable[..., Any],
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "schema: 2\nname: f\nobservability: {metrics: false}\nservices:\n"
        "  - {name: a, command: [x, '{recipe_dir}']}\n"
    )
    assert srt_load(path).source == str(path)
    (inst,) = srt_plan(path).unit("a").instances
    assert inst.argv == ["x", str(tmp_path)], "{recipe_dir} is the file's directory"
    path.write_text(path.read_text().replace("command:", "comand:"))
    found = srt_problems(path)
    assert found and all(p.render(str(path)).startswith(f"{path}:5:") for p in found)


def test_run_cli_runs_srt_here_with_the_given_plugins_and_no_site_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "schema: 2\nname: t\nobservability: {metrics: false}\nservices:\n"
        "  - {name: e, type: echo, command: [x]}\n"
    )
    missing = str(tmp_path / "missing.toml")  # an error if srt read it
    monkeypatch.setenv("SRT_SITE_CONFIG", missing)
    from srt_services.plugins import manager

    before = manager._default
    refused = kit.run_cli(["validate", str(path)])
    assert refused.code == 2, refused
    assert f"{path}:5:" in refused.stderr and "echo" in refused.stderr
    ok = kit.run_cli(["validate", str(path)], kit.isolated_plugins(RecipeHooks(), "hooks"))
    assert ok.code == 0, ok.stderr
    assert kit.run_cli(["dry-run", str(path)], kit.isolated_plugins(RecipeHooks())).stdout
    assert os.environ["SRT_SITE_CONFIG"] == missing
    assert manager._default is before, "the process-wide plugin set is put back"


def test_site_config_is_read_from_its_file_and_reaches_the_plan(
    tmp_path: Path, srt_plan: Callable[..., Any]
) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[readiness]\ntimeout_seconds = 600\n")
    recipe = {
        "observability": {"metrics": False},
        "services": [{"name": "a", "command": ["x"], "readiness": {"port": 9000}}],
    }
    (default,) = srt_plan(recipe).unit("a").instances
    (raised,) = srt_plan(recipe, site=kit.site_config(site)).unit("a").instances
    assert default.readiness is not None and default.readiness.timeout == 120.0
    assert raised.readiness is not None and raised.readiness.timeout == 600.0


def test_supervise_runs_a_plan_made_to_run_here(
    tmp_path: Path, srt_plugins: PluginSet, srt_plan: Callable[..., Any]
) -> None:
    job_dir = str(tmp_path / "job")
    recipe = {
        "observability": {"metrics": False},
        "services": [{"name": "a", "terminal": True, "command": ["bash", "-c", "echo hi"]}],
    }
    plan = srt_plan(recipe, local=True, job_dir=job_dir, runs_here=True)
    events: list[str] = []
    result = kit.supervise(srt_plugins, plan, job_dir, on_event=lambda e: events.append(e["event"]))
    assert result.code == 0 and result.job_dir == job_dir
    assert events[0] == "job_started" and events[-1] == "job_finished"
    assert Path(job_dir, "logs", "service_a.out").read_text().strip().endswith("hi")


def test_the_testing_package_exports_what_plugin_tests_need() -> None:
    import srt_services.testing as testing
    from srt_services.checking.load import LoadedRecipe
    from srt_services.plugins.manager import PluginSet as Manager

    assert sorted(testing._WHERE) == sorted(testing.__all__)
    assert testing.RecipeError is RecipeError
    assert testing.PluginSet is Manager and testing.LoadedRecipe is LoadedRecipe
    assert testing.KitSettings is kit.KitSettings and testing.CliResult is kit.CliResult
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        testing.Nope  # noqa: B018


def test_free_ports_are_distinct_and_free_on_every_address(
    srt_free_port: Callable[[], int],
) -> None:
    ports = [srt_free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    for port in ports[:3]:
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))


def test_needs_skips_or_fails_as_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SRT_REQUIRE_KIT_TEST", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs no-such-dist: pip install it"):
        needs.version_of("no-such-dist", "pip install it", "SRT_REQUIRE_KIT_TEST")
    monkeypatch.setenv("SRT_REQUIRE_KIT_TEST", "1")
    with pytest.raises(pytest.fail.Exception, match=r"needs the thing \(SRT_REQUIRE_KIT_TEST=1\)"):
        needs.missing("needs the thing", "SRT_REQUIRE_KIT_TEST")
    assert needs.version_of("pytest", "pip install pytest", "SRT_REQUIRE_KIT_TEST") == (
        pytest.__version__
    )


def test_venv_script_is_found_beside_python_when_not_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert needs.venv_script("srt") == str(Path(sys.executable).parent / "srt")
    assert needs.venv_script("no-such-script") is None


def test_run_venv_srt_has_only_bash_on_path(tmp_path: Path) -> None:
    run = run_venv_srt(
        "schema: 2\nname: v\nobservability: {metrics: false}\nfrontend: {type: none}\n"
        "services:\n  - name: c\n    terminal: true\n"
        "    command: [bash, -c, 'echo \"$PATH\"; command -v srt || echo no srt']\n",
        tmp_path,
    )
    assert run.code == 0, run.stdout + run.stderr
    assert run.log("service_c").split() == [str(tmp_path / "path"), "no", "srt"]


# --------------------------------------------------------------------------- as an author runs it

AUTHOR_CONFTEST = 'pytest_plugins = ["srt_services.testing.pytest_plugin"]\n'

AUTHOR_TESTS = """
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from srt_services import hookimpl
from srt_services.contracts.kind import KindOptions, ServiceKind
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
