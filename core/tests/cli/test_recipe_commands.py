"""``srt validate``, ``dry-run``, ``schema``, ``kinds`` and ``migrate`` as a user runs them.

In-process through ``srt_services.cli.main.main`` (the real exit-code mapping) with the
process-wide plugin set replaced by the built-ins only; one subprocess test proves the
installed entry point behaves the same.
"""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
import srt_services
import yaml
from srt_services.cli.main import main
from srt_services.contracts.plan import Plan
from srt_services.extend import KindOptions, ServiceKind, hookimpl
from srt_services.plugins import manager
from srt_services.plugins.manager import PluginSet
from srt_services.testing import kit

EXAMPLES = ["minimal", "disagg-services", "pools", "per-worker"]


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def builtin_plugins() -> Iterator[None]:
    manager.reset_default(kit.isolated_plugins)
    yield
    manager.reset_default(None)


@pytest.fixture
def srt(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def run(*args: str) -> Result:
        with pytest.raises(SystemExit) as info:
            main(list(args))
        out, err = capsys.readouterr()
        code = info.value.code
        return Result(code if isinstance(code, int) else 1, out, err)

    return run


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


#: ``observability.metrics: false`` (last, so the lines above stay put) keeps the warning
#: that the default metrics would give without srt-exporters out of these outputs.
NO_METRICS = "observability: {metrics: false}\n"
GOOD = (
    "schema: 2\nname: t\nservices:\n  - {name: a, command: [a]}\n  - {name: b, command: [b]}\n"
    + NO_METRICS
)
#: Valid, with one warning (a source nothing builds) on line 6.
WARNS = (
    "schema: 2\nname: t\nservices:\n  - name: a\n    command: [a]\n"
    "    source: {git: https://example.invalid/r, rev: v1}\n" + NO_METRICS
)
BAD = (
    "schema: 2\nname: t\nservices:\n  - {name: a}\n"
    "  - {name: a, command: [a], placement: {node: later}}\n" + NO_METRICS
)


# --------------------------------------------------------------------------- validate


def test_validate_ok(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "good.yaml", GOOD)
    r = srt("validate", path)
    assert r.code == 0
    assert r.out == f"{path}: ok (2 service(s))\n"
    assert r.err == ""


def test_validate_invalid_exits_2_with_every_error(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", BAD)
    r = srt("validate", path)
    assert r.code == 2
    assert r.out == ""
    assert r.err.splitlines() == [
        f"{path}:4:5: services[a].command: is required for type 'generic'",
        f"{path}:5:6: services[a].name: duplicate service name 'a' (also services[0])",
        f"{path}:5:41: services[a].placement.node: must be one of agg, all, compute, decode,"
        " dedicated, head, infra, prefill, workers; got 'later'",
        f"{path}: 3 errors",
    ]


def test_validate_several_files(srt, tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", BAD)
    missing = str(tmp_path / "missing.yaml")
    r = srt("validate", good, bad, missing, good)
    assert r.code == 2
    assert r.out.count(": ok (2 service(s))") == 2
    assert f"{bad}: 3 errors" in r.err
    assert f"{missing}: no such file" in r.err


def test_validate_quiet(srt, tmp_path: Path) -> None:
    r = srt("validate", "-q", write(tmp_path, "good.yaml", GOOD))
    assert (r.code, r.out) == (0, "")


def test_validate_prints_warnings(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", WARNS)
    r = srt("validate", path)
    assert r.code == 0
    assert r.err.startswith(
        f"warning: {path}:6:5: services[a].source: is cloned but nothing builds it"
    )


def test_validate_json_reports_every_recipe(srt, tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", BAD)
    missing = str(tmp_path / "missing.yaml")
    r = srt("validate", "--format", "json", good, bad, missing)
    assert (r.code, r.err) == (2, "")
    reports = json.loads(r.out)
    assert [(x["recipe"], x["valid"], x["services"]) for x in reports] == [
        (good, True, 2),
        (bad, False, None),
        (missing, False, None),
    ]
    assert reports[0]["problems"] == []
    assert reports[1]["problems"][0] == {
        "severity": "error",
        "line": 4,
        "column": 5,
        "field": "services[a].command",
        "message": "is required for type 'generic'",
    }
    assert len(reports[1]["problems"]) == 3
    assert reports[2]["problems"] == [
        {
            "severity": "error",
            "line": None,
            "column": None,
            "field": None,
            "message": "no such file",
        }
    ]


def test_validate_json_carries_warnings_of_valid_recipes(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", WARNS)
    r = srt("validate", "--format", "json", path)
    assert r.code == 0
    (report,) = json.loads(r.out)
    assert report["valid"] is True
    assert [(p["severity"], p["line"], p["field"]) for p in report["problems"]] == [
        ("warning", 6, "services[a].source")
    ]


def test_validate_github_annotates_the_lines(srt, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", BAD)
    r = srt("validate", "--format", "github", bad, write(tmp_path, "good.yaml", GOOD))
    assert (r.code, r.err) == (2, "")
    lines = r.out.splitlines()
    assert len(lines) == 3
    assert lines[0] == (
        f"::error file={bad},line=4,col=5,title=srt validate::services[a].command: is required"
        " for type 'generic'"
    )


def test_github_annotations_escape_what_the_runner_parses() -> None:
    from srt_services.cli.recipe_cmds import _github_annotation

    line = _github_annotation(
        "a,b:c.yaml",
        {"severity": "warning", "line": None, "column": None, "field": None, "message": "50%\nx"},
    )
    assert line == "::warning file=a%2Cb%3Ac.yaml,title=srt validate::50%25%0Ax"


def stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def test_validate_reads_stdin_as_dash(srt, monkeypatch) -> None:
    stdin(monkeypatch, BAD)
    r = srt("validate", "-")
    assert r.code == 2
    assert (
        r.err.splitlines()[0] == "<stdin>:4:5: services[a].command: is required for type 'generic'"
    )
    stdin(monkeypatch, GOOD)
    r = srt("validate", "--format", "json", "-")
    assert r.code == 0
    assert [(x["recipe"], x["valid"]) for x in json.loads(r.out)] == [("<stdin>", True)]


def test_dry_run_reads_a_generated_json_recipe_from_stdin(srt, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    recipe = {
        "schema": 2,
        "name": "g",
        "services": [{"name": "a", "command": ["a", "{recipe_dir}"]}],
    }
    stdin(monkeypatch, json.dumps(recipe))
    r = srt("dry-run", "-", "--json")
    assert r.code == 0, r.err
    (unit,) = json.loads(r.out)["units"]
    assert unit["instances"][0]["argv"] == ["a", str(tmp_path)]  # {recipe_dir}: the cwd


def test_stdin_is_held_to_the_recipe_size_limit(srt, monkeypatch) -> None:
    monkeypatch.setattr("srt_services.recipe.reading.MAX_RECIPE_BYTES", 10)
    stdin(monkeypatch, GOOD)
    r = srt("validate", "-")
    assert r.code == 2
    assert r.err == "<stdin>: recipe is more than 10 bytes; refusing it\n"


def test_commands_that_keep_the_recipe_refuse_stdin(srt) -> None:
    for command in ("run", "render", "migrate"):
        r = srt(command, "-")
        assert r.code == 2, command
        assert "'-' does not exist" in r.err


def test_validate_every_example(srt, repo: Path) -> None:
    paths = [str(repo / "examples" / f"{e}.yaml") for e in EXAMPLES]
    r = srt("validate", *paths)
    assert r.code == 0, r.err
    assert r.out.count(": ok (") == len(EXAMPLES)


def test_usage_error_exits_2(srt) -> None:
    r = srt("validate")
    assert r.code == 2
    assert "Missing argument" in r.err


# --------------------------------------------------------------------------- dry-run


@pytest.mark.parametrize("example", EXAMPLES)
def test_dry_run_text_matches_the_golden_file(srt, repo: Path, example: str, monkeypatch) -> None:
    monkeypatch.chdir(repo)
    nodes = ["--nodes", "2"] if example == "per-worker" else []
    r = srt("dry-run", f"examples/{example}.yaml", *nodes)
    assert r.code == 0, r.err
    assert r.out == (repo / "core" / "tests" / "golden" / f"{example}.txt").read_text()


@pytest.mark.parametrize("example", EXAMPLES)
def test_dry_run_json_round_trip(srt, repo: Path, example: str) -> None:
    r = srt("dry-run", str(repo / "examples" / f"{example}.yaml"), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    golden = json.loads((repo / "core" / "tests" / "golden" / f"{example}.json").read_text())
    if example != "per-worker":  # the golden per-worker plan is for --nodes 2 (the same here)
        assert data == golden
    plan = Plan.from_json(r.out)
    assert json.loads(plan.to_json()) == data
    assert plan.job_name == golden["job_name"]


def test_dry_run_unit_shows_only_the_named_units(srt, repo: Path, monkeypatch) -> None:
    monkeypatch.chdir(repo)
    r = srt("dry-run", "examples/disagg-services.yaml", "--unit", "kv-router", "--srun")
    assert r.code == 0, r.err
    full = (repo / "core" / "tests" / "golden" / "disagg-services.txt").read_text()
    # the unit's own block is exactly the one of the full plan
    block = r.out.split("Phase before_workers:\n", 1)[1].split("Metrics targets:", 1)[0]
    assert block in full
    assert r.out.startswith("Job disagg-demo: ")
    assert "Start order:" not in r.out and "  frontend  type=" not in r.out
    assert "service=kv-router" in r.out
    srun = r.out.split("srun lines (job <job_id>):\n", 1)[1].splitlines()
    assert [line.split(":")[0].strip() for line in srun] == ["service_kv-router"]


def test_dry_run_unknown_unit_suggests_a_close_name(srt, repo: Path) -> None:
    r = srt("dry-run", str(repo / "examples" / "disagg-services.yaml"), "--unit", "router")
    assert r.code == 2
    assert "--unit router: the plan has no unit of that name; did you mean kv-router?" in r.err


def test_dry_run_unknown_unit_lists_the_units(srt, repo: Path) -> None:
    """Nothing close to the name: the units there are, so the user can pick one."""
    r = srt("dry-run", str(repo / "examples" / "disagg-services.yaml"), "--unit", "nosuch")
    assert r.code == 2
    line = next(x for x in r.err.splitlines() if x.startswith("Error: --unit nosuch"))
    units = line.split("(units: ", 1)[1].rstrip(")").split(", ")
    plan = json.loads(srt("dry-run", str(repo / "examples" / "disagg-services.yaml"), "--json").out)
    assert units == [u["name"] for u in plan["units"]]
    assert "kv-router" in units and "frontend" in units


def test_dry_run_unit_is_for_the_text(srt, repo: Path) -> None:
    path = str(repo / "examples" / "disagg-services.yaml")
    r = srt("dry-run", path, "--unit", "kv-router", "--json")
    assert r.code == 2
    assert "filter --json with jq" in r.err


def test_dry_run_allocation_too_small(srt, repo: Path) -> None:
    path = str(repo / "examples" / "disagg-services.yaml")
    r = srt("dry-run", path, "--nodes", "2")
    assert r.code == 2
    assert r.err == (
        f"{path}:7:1: the allocation has 2 node(s) but the recipe needs 3:"
        " 1 for prefill, 2 for decode\n"
    )


def test_dry_run_nodelist(srt, repo: Path) -> None:
    r = srt("dry-run", str(repo / "examples" / "pools.yaml"), "--nodelist", "gpu-a,gpu-b", "--json")
    assert r.code == 0, r.err
    assert [n["name"] for n in json.loads(r.out)["nodes"]] == ["gpu-a", "gpu-b"]


def test_dry_run_local_addresses(srt, repo: Path) -> None:
    r = srt("dry-run", str(repo / "examples" / "pools.yaml"), "--local", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["allocation"] == "local"
    assert [n["ip"] for n in data["nodes"]] == ["127.0.0.1", "127.0.0.2"]


def test_dry_run_local_names_the_srun_settings_srt_run_will_not_apply(srt, tmp_path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        "schema: 2\nname: t\nservices:\n"
        "  - {name: a, command: [a], container: img:1, cpu_bind: cores}\n"
        "  - {name: b, command: [b], cpus_per_task: 2}\n"
        "  - {name: c, command: [c]}\n",
    )
    expected = [
        "services[a]: the local launcher does not apply container, cpu_bind;"
        " it runs the process without them",
        "services[b]: the local launcher does not apply cpus_per_task;"
        " it runs the process without them",
    ]
    r = srt("dry-run", path, "--local", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["warnings"] == expected
    assert [
        line for line in srt("dry-run", path, "--local").out.splitlines() if "launcher" in line
    ] == [f"warning: {w}" for w in expected]
    # planned for a cluster, the settings are applied: nothing to say
    assert json.loads(srt("dry-run", path, "--json").out)["warnings"] == []


def test_dry_run_nodes_and_nodelist_together(srt, repo: Path) -> None:
    r = srt("dry-run", str(repo / "examples" / "pools.yaml"), "--nodes", "2", "--nodelist", "a,b")
    assert r.code == 2
    assert "give --nodes or --nodelist, not both" in r.err


def test_dry_run_invalid_recipe(srt, tmp_path: Path) -> None:
    r = srt("dry-run", write(tmp_path, "bad.yaml", BAD))
    assert r.code == 2
    assert r.err.endswith(": 3 errors\n")
    assert "Traceback" not in r.err


def test_dry_run_json_recipe(srt, tmp_path: Path, repo: Path) -> None:
    data = yaml.safe_load((repo / "examples" / "pools.yaml").read_text())
    path = write(tmp_path, "pools.json", json.dumps(data))
    r = srt("dry-run", path, "--json")
    assert r.code == 0, r.err
    golden = json.loads((repo / "core" / "tests" / "golden" / "pools.json").read_text())
    assert json.loads(r.out) == golden


def test_installed_entry_point_agrees(repo: Path, srt_env: dict[str, str], python: str) -> None:
    out = subprocess.run(
        [python, "-m", "srt_services", "dry-run", "examples/minimal.yaml"],
        capture_output=True,
        text=True,
        env=srt_env,
        cwd=repo,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == (repo / "core" / "tests" / "golden" / "minimal.txt").read_text()
    bad = subprocess.run(
        [python, "-m", "srt_services", "validate", "core/tests/golden/minimal.txt"],
        capture_output=True,
        text=True,
        env=srt_env,
        cwd=repo,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- schema


@pytest.fixture
def schema(srt) -> dict:  # type: ignore[type-arg]
    r = srt("schema")
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_schema_is_a_valid_json_schema(schema: dict) -> None:  # type: ignore[type-arg]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("example", EXAMPLES)
def test_schema_accepts_the_examples(schema: dict, repo: Path, example: str) -> None:  # type: ignore[type-arg]
    jsonschema = pytest.importorskip("jsonschema")
    data = yaml.safe_load((repo / "examples" / f"{example}.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


@pytest.mark.parametrize(
    "bad",
    [
        {"schema": 2, "name": "t", "frontnd": {}},
        {
            "schema": 2,
            "name": "t",
            "services": [{"name": "a", "command": ["a"], "readiness": {"htpp": {}}}],
        },
        {
            "schema": 2,
            "name": "t",
            "services": [{"name": "a", "command": ["a"], "options": {"x": 1}}],
        },
        {"schema": 2, "name": "t", "services": [{"name": "a", "command": ["a"], "start": "later"}]},
        {"schema": 1, "name": "t"},
    ],
)
def test_schema_rejects_what_srt_rejects(schema: dict, bad: dict) -> None:  # type: ignore[type-arg]
    jsonschema = pytest.importorskip("jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


def test_schema_has_the_probe_properties(schema: dict) -> None:  # type: ignore[type-arg]
    readiness = schema["$defs"]["ReadinessSpec"]["properties"]
    assert {"port", "tcp", "http", "log", "file", "timeout_seconds", "interval_seconds"} <= set(
        readiness
    )
    assert readiness["http"]["properties"]["path"]["default"] == "/health"
    assert "pattern" in readiness["log"]["properties"]
    assert schema["$defs"]["ReadinessSpec"]["additionalProperties"] is False
    assert "tcp" in schema["$defs"]["LivenessSpec"]["properties"]
    assert schema["$defs"]["ServiceSpec"]["properties"]["type"]["examples"] == ["generic"]


def test_schema_to_a_file(srt, tmp_path: Path) -> None:
    out = tmp_path / "recipe.schema.json"
    r = srt("schema", "-o", str(out))
    assert (r.code, r.out) == (0, "")
    assert json.loads(out.read_text())["$id"].endswith("recipe-2.json")


# --------------------------------------------------------------------------- kinds


def test_kinds_table_in_a_pipe_is_every_column_in_full(srt, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")  # not a terminal: COLUMNS does not narrow it
    r = srt("kinds")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        "TYPE     START           CRITICAL  PLACEMENT  READINESS  EXTERNAL  DEDICATED  PLUGIN",
        "generic  after_frontend  no        head       -          no        no"
        "         srt-services (built-in)",
    ]


def test_kinds_name_shows_one_kind_in_full(srt) -> None:
    r = srt("kinds", "generic")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[:3] == ["generic", "  Runs the recipe's command as written; no defaults.", ""]
    assert "plugin:             srt-services (built-in)" in lines
    assert "command:            required" in lines
    assert "stop:               SIGTERM, SIGKILL after 30 s" in lines
    assert lines[-1] == "options: none (any `options:` key is refused)"
    detail = json.loads(srt("kinds", "generic", "--json").out)
    assert detail["type"] == "generic"
    assert detail["option_fields"] == []
    r = srt("kinds", "generik")
    assert r.code == 2
    assert "Error: service type 'generik' is not known (known: generic); did you mean" in r.err


def test_kinds_name_lists_options_with_types_defaults_and_descriptions() -> None:
    from pydantic import Field
    from srt_services.cli.kind_views import kind_text
    from srt_services.extend import KindOptions, ServiceKind
    from srt_services.plugins.kind_table import kind_detail

    class DemoOptions(KindOptions):
        port: int = Field(2379, description="Client port. " + "A long description. " * 8)
        mode: Literal["a", "b"] | None = None
        peers: list[str] = Field(default_factory=list)
        name: str = Field(description="Required.")

    class Demo(ServiceKind):
        name = "demo"
        summary = "A demo kind."
        Options = DemoOptions

    plugins = kit.isolated_plugins()

    class Plugin:
        @srt_services.hookimpl
        def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
            return [Demo]

    plugins.register(Plugin(), "demo-plugin")
    text = kind_text(kind_detail(plugins, "demo"), 60)
    assert all(len(line) <= 60 for line in text.splitlines())
    options = text[text.index("options:") :].splitlines()
    assert options[0:2] == ["options:", "  port: int, default 2379"]
    assert options[2].startswith("      Client port. A long description.")
    assert "  mode: 'a' | 'b' | None, default none" in options
    assert "  peers: list[str], default []" in options
    assert "  name: str, required" in options


def test_kinds_json(srt) -> None:
    r = srt("kinds", "--json")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)
    assert row["type"] == "generic"
    assert row["start"] == "after_frontend"
    assert row["critical"] is False
    assert row["placement"] == "head"
    assert row["external"] is False
    assert row["options"] == []
    assert row["summary"]


# --------------------------------------------------------------------------- migrate


class V1Kinds:
    """Stand-ins for the kinds migrated recipes name, so a result can load here: srt-etcd,
    srt-nats and srt-mooncake are not part of core's tests (each plugin's own tests and
    tests/ migrate with the real kinds). Their placement and option rules only."""

    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        infra = frozenset({"head", "infra", "dedicated"})

        class Etcd(ServiceKind):
            name: ClassVar[str] = "etcd"
            summary: ClassVar[str] = "stand-in"
            default_placement: ClassVar[str] = "infra"
            allowed_placements: ClassVar[frozenset[str] | None] = infra
            supports_dedicated: ClassVar[bool] = True
            shares_infra_node: ClassVar[bool] = True

            def command(self, spec: Any, options: Any, ctx: Any) -> list[str]:
                return ["etcd"]

        class NatsOptions(KindOptions):
            max_payload_mb: int | None = None

        class Nats(Etcd):
            name: ClassVar[str] = "nats"
            Options: ClassVar[type[KindOptions]] = NatsOptions

        class MasterOptions(KindOptions):
            store_config: dict[str, Any] | None = None

        class Master(Etcd):
            name: ClassVar[str] = "mooncake-master"
            Options: ClassVar[type[KindOptions]] = MasterOptions

        return [Etcd, Nats, Master]


@pytest.fixture
def v1_kinds() -> Iterator[None]:
    def make() -> PluginSet:
        plugins = kit.isolated_plugins()
        plugins.register(V1Kinds(), "v1-kinds")
        return plugins

    manager.reset_default(make)
    yield
    manager.reset_default(None)


V1 = """\
name: old
frontend: {type: dynamo, command: [f]}
infra:
  etcd_nats_dedicated_node: true
  nats_max_payload_mb: 24
services:
  - name: side
    command: [s]
"""


def test_migrate_infra_block(srt, tmp_path: Path, v1_kinds) -> None:
    path = write(tmp_path, "v1.yaml", V1)
    r = srt("migrate", path)
    assert r.code == 0, r.err
    data = yaml.safe_load(r.out)
    assert data["schema"] == 2
    assert "infra" not in data
    assert data["services"] == [
        {"name": "etcd", "type": "etcd", "placement": {"node": "dedicated"}},
        {
            "name": "nats",
            "type": "nats",
            "placement": {"node": "dedicated"},
            "options": {"max_payload_mb": 24},
        },
        {"name": "side", "command": ["s"]},
    ]
    assert "infra.etcd_nats_dedicated_node -> services etcd placement.node: dedicated" in r.err
    assert "infra.nats_max_payload_mb -> services nats options.max_payload_mb" in r.err


def test_migrate_is_idempotent(srt, tmp_path: Path, v1_kinds) -> None:
    once = srt("migrate", write(tmp_path, "v1.yaml", V1)).out
    twice = srt("migrate", write(tmp_path, "v2.yaml", once))
    assert twice.code == 0
    assert twice.out == once
    assert "already schema 2; nothing to do" in twice.err


def test_migrate_in_place_keeps_a_backup(srt, tmp_path: Path, v1_kinds) -> None:
    path = write(tmp_path, "v1.yaml", V1)
    r = srt("migrate", "--in-place", path)
    assert (r.code, r.out) == (0, "")
    assert (tmp_path / "v1.yaml.v1").read_text() == V1
    assert yaml.safe_load((tmp_path / "v1.yaml").read_text())["schema"] == 2


def test_migrate_output_file(srt, tmp_path: Path, v1_kinds) -> None:
    out = tmp_path / "new.yaml"
    r = srt("migrate", write(tmp_path, "v1.yaml", V1), "-o", str(out))
    assert r.code == 0
    assert yaml.safe_load(out.read_text())["schema"] == 2


def test_migrate_static_frontend_drops_infra(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "v1.yaml", V1.replace("type: dynamo", "type: sglang"))
    r = srt("migrate", path)
    data = yaml.safe_load(r.out)
    assert "infra" not in data
    assert [s["name"] for s in data["services"]] == ["side"]
    assert "dropped infra (no discovery plane under frontend.type sglang)" in r.err


def test_migrate_then_validate(srt, tmp_path: Path) -> None:
    text = (
        "name: old\nfrontend: {type: sglang, command: [f]}\n"
        "services:\n  - {name: side, command: [s]}\n"
    )
    path = write(tmp_path, "v1.yaml", text)
    assert srt("validate", path).code == 2  # no schema: the pointer to migrate
    srt("migrate", "--in-place", path)
    assert srt("validate", path).code == 0


def test_migrate_not_a_mapping(srt, tmp_path: Path) -> None:
    r = srt("migrate", write(tmp_path, "x.yaml", "- a\n"))
    assert r.code == 2
    assert "a recipe is a mapping of settings" in r.err


def test_migrate_backend_mooncake(srt, tmp_path: Path, v1_kinds) -> None:
    text = (
        "name: old\nfrontend: {type: sglang, command: [f]}\n"
        "backend:\n  type: sglang\n  mooncake_kv_store:\n    container: mc\n"
        "    master_extra_args: [--x]\n    store_config: {a: 1}\n"
    )
    r = srt("migrate", write(tmp_path, "v1.yaml", text))
    assert r.code == 0, r.err
    data = yaml.safe_load(r.out)
    assert "backend" not in data
    assert data["engine"] == {"type": "sglang"}
    assert "backend.type -> engine.type" in r.err
    assert data["services"] == [
        {
            "name": "mooncake-master",
            "type": "mooncake-master",
            "container": "mc",
            "args": ["--x"],
            "options": {"store_config": {"a": 1}},
        },
    ]


COMMENTED_V1 = """\
# Disaggregated demo, v1 layout.
name: old   # job name
frontend: {type: dynamo, command: [f]}
dynamo:
  request_plane: nats
# the discovery plane on its own node
infra:
  etcd_nats_dedicated_node: true
roles:
  agg:
    workers: 1
    command: ["python3", '-m', server]   # quoted on purpose
    env: {MC_X: "0", KEEP: "yes"}
backend:
  type: sglang
  mooncake_kv_store:
    container: mc
    env: {MC_X: "1"}
"""


def test_migrate_keeps_comments_order_and_quoting(srt, tmp_path: Path, v1_kinds) -> None:
    r = srt("migrate", write(tmp_path, "v1.yaml", COMMENTED_V1))
    assert r.code == 0, r.err
    assert r.out == (
        "# Disaggregated demo, v1 layout.\n"
        "schema: 2\n"
        "name: old   # job name\n"
        "frontend: {type: dynamo, command: [f]}\n"
        "dynamo:\n"
        "  request_plane: nats\n"
        "# the discovery plane on its own node\n"
        "services:\n"
        "  - name: etcd\n"
        "    type: etcd\n"
        "    placement:\n"
        "      node: dedicated\n"
        "  - name: nats\n"
        "    type: nats\n"
        "    placement:\n"
        "      node: dedicated\n"
        "  - name: mooncake-master\n"
        "    type: mooncake-master\n"
        "    container: mc\n"
        "    placement:\n"
        "      node: dedicated\n"
        "roles:\n"
        "  agg:\n"
        "    workers: 1\n"
        "    command: [\"python3\", '-m', server]   # quoted on purpose\n"
        '    env: {MC_X: "1", KEEP: "yes"}\n'
        "engine:\n"
        "  type: sglang\n"
    )
    assert "backend.mooncake_kv_store.env -> roles.agg.env" in r.err


def test_migrate_follows_the_files_own_indentation(srt, tmp_path: Path, v1_kinds) -> None:
    text = (
        "name: old\ninfra:\n    nats_max_payload_mb: 8\nservices:\n- name: side\n  command: [s]\n"
    )
    r = srt("migrate", write(tmp_path, "v1.yaml", text))
    assert r.out == (
        "schema: 2\nname: old\nservices:\n- name: nats\n  type: nats\n  options:\n"
        "      max_payload_mb: 8\n- name: side\n  command: [s]\n"
    )


def test_migrate_drops_the_default_false_with_a_note(srt, tmp_path: Path) -> None:
    path = write(tmp_path, "v1.yaml", "name: old\ninfra: {etcd_nats_dedicated_node: false}\n")
    r = srt("migrate", path)
    assert r.out == "schema: 2\nname: old\n"
    assert "dropped infra.etcd_nats_dedicated_node: false (the default)" in r.err


def test_migrate_a_json_recipe_stays_json(srt, tmp_path: Path, v1_kinds) -> None:
    r = srt(
        "migrate",
        write(tmp_path, "v1.json", '{"name": "old", "infra": {"nats_max_payload_mb": 4}}'),
    )
    assert json.loads(r.out) == {
        "schema": 2,
        "name": "old",
        "services": [{"name": "nats", "type": "nats", "options": {"max_payload_mb": 4}}],
    }


def test_migrate_a_directory_in_place_goes_past_a_bad_file(srt, tmp_path: Path, v1_kinds) -> None:
    tree = tmp_path / "recipes"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.yaml").write_text(V1)
    (tree / "sub" / "b.yml").write_text("name: b\nbroken: [\n")
    (tree / "sub" / "c.yaml").write_text(GOOD)
    (tree / "notes.txt").write_text("not a recipe")
    r = srt("migrate", "--in-place", str(tree))
    assert r.code == 2
    assert f"{tree / 'sub' / 'b.yml'}: not migrated" in r.err
    assert "1 migrated, 1 already schema 2, 1 not migrated" in r.err
    assert yaml.safe_load((tree / "a.yaml").read_text())["schema"] == 2
    assert (tree / "a.yaml.v1").read_text() == V1
    # already schema 2: untouched, and no backup
    assert (tree / "sub" / "c.yaml").read_text() == GOOD
    assert not (tree / "sub" / "c.yaml.v1").exists()
    assert (tree / "sub" / "b.yml").read_text() == "name: b\nbroken: [\n"


def test_migrate_several_recipes_need_in_place(srt, tmp_path: Path) -> None:
    a, b = write(tmp_path, "a.yaml", V1), write(tmp_path, "b.yaml", V1)
    r = srt("migrate", a, b)
    assert r.code == 2
    assert "2 recipes: rewrite them with --in-place" in r.err
    assert (tmp_path / "a.yaml").read_text() == V1


def test_migrate_verify_writes_only_results_that_load(srt, tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "good.yaml",
        "name: ok\nfrontend: {type: none}\ninfra: {etcd_nats_dedicated_node: false}\nservices:\n  - {name: s, command: [s]}\n",
    )
    # the mooncake-master kind is not installed here, so the result would not load
    bad = write(
        tmp_path,
        "bad.yaml",
        "name: mc\nfrontend: {type: none}\nbackend: {mooncake_kv_store: {container: mc}}\n",
    )
    r = srt("migrate", "--in-place", "--verify", good, bad)
    assert r.code == 2
    assert f"{bad}: the migrated recipe does not load" in r.err
    assert "services[mooncake-master].type: service type 'mooncake-master' is not known" in r.err
    assert f"{bad}: not migrated" in r.err
    assert yaml.safe_load(Path(good).read_text())["schema"] == 2
    assert "schema" not in yaml.safe_load(Path(bad).read_text())


def test_migrate_text_ruamel_cannot_read_is_migrated_without_its_layout(
    srt, tmp_path, v1_kinds
) -> None:
    # libyaml (srt's loader) accepts a tab after a value; ruamel's scanner refuses it
    r = srt(
        "migrate", write(tmp_path, "v1.yaml", "# c\nname: old\t\ninfra: {nats_max_payload_mb: 4}\n")
    )
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out) == {
        "schema": 2,
        "name": "old",
        "services": [{"name": "nats", "type": "nats", "options": {"max_payload_mb": 4}}],
    }
    assert "comments and layout not kept: ruamel.yaml cannot read this text" in r.err


def test_migrate_reads_yaml_1_1_booleans_as_srt_does(srt, tmp_path: Path) -> None:
    # ruamel reads YAML 1.2, where `no` is a string; srt (and v1) read it as false
    r = srt(
        "migrate", write(tmp_path, "v1.yaml", "name: old\ninfra:\n  etcd_nats_dedicated_node: no\n")
    )
    assert r.out == "schema: 2\nname: old\n"
    assert "dropped infra.etcd_nats_dedicated_node: false (the default)" in r.err


def test_dry_run_applies_the_sites_readiness_timeout(srt, tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[readiness]\ntimeout_seconds = 600\n")
    monkeypatch.setenv("SRT_SITE_CONFIG", str(site))
    recipe = write(
        tmp_path,
        "r.yaml",
        "schema: 2\nname: t\nservices:\n  - {name: a, command: [a], readiness: {port: 7001}}\n",
    )
    r = srt("dry-run", recipe)
    assert r.code == 0, r.err
    (line,) = [x for x in r.out.splitlines() if "readiness:" in x]
    assert line.endswith(", timeout 600s, interval 2s"), line


@pytest.mark.parametrize("value", ["0", "-5", "inf", "true", '"600"'])
def test_site_readiness_timeout_must_be_a_positive_number(value: str) -> None:
    import tomllib

    from srt_services.site_config import SiteConfigError, parse

    with pytest.raises(
        SiteConfigError, match=r"readiness\.timeout_seconds must be a positive number"
    ):
        parse(tomllib.loads(f"[readiness]\ntimeout_seconds = {value}\n"), "site.toml")


def test_migrate_a_flow_style_yaml_recipe_stays_yaml(srt, tmp_path: Path, v1_kinds) -> None:
    # JSON or YAML is the loader's decision (the file's name counts), not a leading brace
    r = srt("migrate", write(tmp_path, "v1.yaml", "{name: old, infra: {nats_max_payload_mb: 4}}\n"))
    assert r.code == 0, r.err
    assert not r.out.lstrip().startswith('{"')
    assert yaml.safe_load(r.out) == {
        "schema": 2,
        "name": "old",
        "services": [{"name": "nats", "type": "nats", "options": {"max_payload_mb": 4}}],
    }


def test_migrate_fails_when_the_result_does_not_load_even_without_verify(
    srt, tmp_path: Path
) -> None:
    # built-ins only: the migrated mooncake-master entry names a kind nobody provides here
    path = write(
        tmp_path,
        "v1.yaml",
        "name: mc\nfrontend: {type: none}\nbackend: {type: vllm, mooncake_kv_store: {container: mc}}\n",
    )
    r = srt("migrate", path)
    assert r.code == 2
    # the result is still shown (it is what the user fixes), with why it does not load
    assert yaml.safe_load(r.out)["services"] == [
        {"name": "mooncake-master", "type": "mooncake-master", "container": "mc"}
    ]
    assert f"{path}: the migrated recipe does not load" in r.err
    assert "it is provided by srt-mooncake, which is not installed" in r.err
    assert "not migrated" not in r.err


def test_migrate_in_place_counts_results_that_do_not_load(srt, tmp_path: Path, v1_kinds) -> None:
    good = write(tmp_path, "good.yaml", V1)
    # the v1 env has no role to carry it, so backend.mooncake_kv_store stays and is refused
    bad = write(
        tmp_path,
        "bad.yaml",
        "name: mc\nfrontend: {type: none}\nbackend:\n  mooncake_kv_store: {env: {A: '1'}}\n",
    )
    r = srt("migrate", "--in-place", good, bad)
    assert r.code == 2
    assert "2 migrated (1 of them do not load), 0 already schema 2, 0 not migrated" in r.err
    assert f"{bad}:4:1: backend: unknown key" in r.err
    assert yaml.safe_load(Path(bad).read_text())["schema"] == 2  # written: --verify was not given
    assert yaml.safe_load(Path(good).read_text())["schema"] == 2


def test_migrate_backend_type_fills_an_engine_block_without_one(
    srt, tmp_path: Path, v1_kinds
) -> None:
    r = srt(
        "migrate",
        write(
            tmp_path,
            "v1.yaml",
            "name: old\nengine: {failover: false}\nbackend: {type: trtllm}\n",
        ),
    )
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out) == {
        "schema": 2,
        "name": "old",
        "engine": {"failover": False, "type": "trtllm"},
    }


def test_migrate_keeps_a_backend_type_that_disagrees_with_engine(
    srt, tmp_path: Path, v1_kinds
) -> None:
    r = srt(
        "migrate",
        write(tmp_path, "v1.yaml", "name: old\nengine: {type: vllm}\nbackend: {type: sglang}\n"),
    )
    assert r.code == 2
    assert "kept backend.type sglang: engine.type says vllm (drop one by hand)" in r.err
    assert yaml.safe_load(r.out)["backend"] == {"type": "sglang"}


@pytest.mark.parametrize(
    ("v1", "migrated"),
    [
        (
            "name: old\nbackend:\n  type: vllm   # the engine\nresources: {gpus_per_node: 8}\n",
            "schema: 2\nname: old\nengine:\n  type: vllm   # the engine\n"
            "resources: {gpus_per_node: 8}\n",
        ),
        (
            "name: old\nengine:\n  failover: false   # no\nbackend:\n"
            "  type: vllm   # the engine\n  other: 1\n",
            "schema: 2\nname: old\nengine:\n  failover: false   # no\n"
            "  type: vllm   # the engine\nbackend:\n  other: 1\n",
        ),
        (
            "name: old\nbackend: {type: vllm}   # the engine\nresources: 1\n",
            "schema: 2\nname: old\nengine: {type: vllm}    # the engine\nresources: 1\n",
        ),
        (
            "name: old\nengine: {failover: false}\nbackend:\n  type: vllm   # the engine\n",
            "schema: 2\nname: old\nengine: {failover: false, type: vllm} # the engine\n",
        ),
    ],
)
def test_migrate_keeps_the_comment_of_a_moved_setting(
    srt, tmp_path: Path, v1: str, migrated: str
) -> None:
    """`backend.type` becomes `engine.type`: its inline comment moves with it."""
    r = srt("migrate", write(tmp_path, "v1.yaml", v1))
    assert "backend.type -> engine.type" in r.err
    assert r.out == migrated


def test_migrate_keeps_the_comments_of_the_blocks_it_rewrites(
    srt, tmp_path: Path, v1_kinds
) -> None:
    """`infra:` and `backend.mooncake_kv_store` go away: what was said on and in them, and
    the comment lines after them that introduce the next setting, stay."""
    v1 = (
        "name: old\n"
        "frontend: {type: dynamo, command: [f]}\n"
        "infra:   # the plane\n"
        "  etcd_nats_dedicated_node: true   # own node\n"
        "\n"
        "# the workers\n"
        "roles:\n"
        "  agg: {workers: 1, command: [x]}\n"
        "backend:   # be\n"
        "  type: sglang\n"
        "  mooncake_kv_store:   # mc\n"
        "    container: mc   # image\n"
        "\n"
        "# the end\n"
        "resources: {gpus_per_node: 8}\n"
    )
    r = srt("migrate", write(tmp_path, "v1.yaml", v1))
    assert r.code == 0, r.err
    comments = [line.split("#", 1)[1].strip() for line in r.out.splitlines() if "#" in line]
    assert comments == ["the plane", "own node", "the workers", "be", "mc", "image", "the end"]
    assert r.out.index("# the workers\nroles:") > r.out.index("node: dedicated")
    assert "# the end\nresources:" in r.out
    assert yaml.safe_load(r.out)["services"][0] == {
        "name": "etcd",
        "type": "etcd",
        "placement": {"node": "dedicated"},
    }
