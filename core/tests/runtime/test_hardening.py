"""Fault matrix V03-V05: path traversal, environment injection, command injection."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from srt_services import hookimpl
from srt_services.contracts.kind import ServiceKind
from srt_services.errors import RecipeInvalid
from srt_services.testing import PluginSet, kit
from srt_services.testing.jobs import Jobs
from srt_services.testing.survivors import assert_no_survivors

BAD_NAMES = ["../x", "a/b", ".", "..", "-rf", "a\x00b", "x" * 4096, "ser\u0432ice", "a\nb", "a b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_V03_unsafe_names_are_refused_by_one_rule(
    tmp_path: Path, name: str, srt_load: Callable[..., Any]
) -> None:
    import json

    recipe = tmp_path / "r.json"
    recipe.write_text(
        json.dumps(
            {
                "schema": 2,
                "name": "v03",
                "observability": {"metrics": False},
                "services": [{"name": name, "command": ["true"]}],
            }
        )
    )
    with pytest.raises(RecipeInvalid) as err:
        srt_load(recipe)
    assert ".name:" in str(err.value)


@pytest.mark.parametrize("name", ["../x", "a/b", ".."])
def test_V03_job_and_node_names_too(
    tmp_path: Path, name: str, srt_load: Callable[..., Any]
) -> None:
    import json

    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"schema": 2, "name": name, "observability": {"metrics": False}}))
    with pytest.raises(RecipeInvalid):
        srt_load(recipe)


class EscapingKind(ServiceKind):
    """A kind whose files() writes where the recipe's options say (``name``)."""

    name: ClassVar[str] = "escaper"
    requires_command: ClassVar[bool] = True
    #: where files() writes; set by each test
    target: ClassVar[str] = ""

    def files(self, spec: Any, options: Any, ctx: Any) -> dict[str, str]:
        return {EscapingKind.target: "gotcha"}


class _Plugin:
    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [EscapingKind]


def _run_escaper(plugins: PluginSet, tmp_path: Path, target: str) -> tuple[int, str]:
    """Plan and run the escaper's recipe in this process, as ``srt run`` does."""
    EscapingKind.target = target
    plugins.register(_Plugin(), "escaper-plugin")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: v03\nobservability:\n  metrics: false\nservices:\n"
        '  - {name: e, type: escaper, command: ["true"], terminal: true}\n'
    )
    job_dir = str(tmp_path / "root" / "job")
    plan = kit.plan(plugins, recipe, job_dir=job_dir, runs_here=True)
    code = kit.supervise(plugins, plan, job_dir).code
    assert_no_survivors(job_dir)
    return code, job_dir


@pytest.mark.parametrize(
    "target",
    ["../../../escaped.txt", "{log_dir}/../../escaped.txt", "{job_dir}/escaped.txt", "{tmp}"],
)
def test_V03_nothing_is_written_outside_the_work_and_log_dirs(
    tmp_path: Path, target: str, srt_plugins: PluginSet
) -> None:
    target = target.replace("{tmp}", str(tmp_path / "escaped.txt"))
    code, _ = _run_escaper(srt_plugins, tmp_path, target)
    assert code == 1
    assert list(tmp_path.rglob("escaped.txt")) == []


def test_V03_a_kind_may_write_beside_the_logs(tmp_path: Path, srt_plugins: PluginSet) -> None:
    code, job_dir = _run_escaper(srt_plugins, tmp_path, "{log_dir}/escaper.yml")
    assert code == 0
    assert Path(job_dir, "logs", "escaper.yml").read_text() == "gotcha"


def test_V04_environment_is_allow_listed(jobs: Jobs, tmp_path: Path) -> None:
    dump = tmp_path / "env.txt"
    run = jobs.run(
        f"""
        schema: 2
        name: v04
        observability:
          metrics: false
        services:
          - name: show
            terminal: true
            command: [python3, -c, "import os,json; open('{dump}','w').write(json.dumps(dict(os.environ)))"]
            env:
              MULTI: "line one\\nline two; $(touch /tmp/never)"
              PYTHONPATH: /opt/x
        """,
        env={
            "ETCD_ENDPOINTS": "http://leak:2379",
            "NATS_SERVER": "nats://leak:4222",
            "DYN_NAMESPACE": "leak",
            "SLURM_JOB_ID": "999",
            "SOME_SECRET_TOKEN": "abc",
        },
    )
    assert run.code == 0
    import json

    env = json.loads(dump.read_text())
    for leaked in (
        "ETCD_ENDPOINTS",
        "NATS_SERVER",
        "DYN_NAMESPACE",
        "SLURM_JOB_ID",
        "SOME_SECRET_TOKEN",
    ):
        assert leaked not in env
    assert env["MULTI"] == "line one\nline two; $(touch /tmp/never)"
    assert env["PYTHONPATH"] == "/opt/x"
    assert env["PATH"].endswith(os.environ["PATH"])  # a pyenv shim may prepend its own
    assert env["SRT_INSTANCE"] == "service_show"


def test_V04_loader_variables_are_refused(tmp_path: Path, srt_load: Callable[..., Any]) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: v04\nservices:\n  - name: a\n    command: [x]\n    env:\n      LD_PRELOAD: /tmp/evil.so\n"
    )
    with pytest.raises(RecipeInvalid) as err:
        srt_load(recipe)
    assert "r.yaml:7:7: services[a].env.LD_PRELOAD" in str(err.value)


def test_V05_arguments_are_never_shell_interpreted(jobs: Jobs, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    out = tmp_path / "argv.txt"
    payloads = [f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", f"| touch {marker}"]
    args = ", ".join(f'"{p}"' for p in payloads)
    run = jobs.run(
        f"""
        schema: 2
        name: v05
        observability:
          metrics: false
        services:
          - name: plain
            terminal: true
            command: [python3, -c, "import sys; open('{out}','a').write(repr(sys.argv[1:])+'\\\\n')", {args}]
          - name: with-preamble
            terminal: true
            preamble: "echo preamble ran"
            command: [python3, -c, "import sys; open('{out}','a').write(repr(sys.argv[1:])+'\\\\n')", {args}]
        """
    )
    assert run.code == 0
    assert not marker.exists()
    lines = out.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line == repr(payloads)
    assert "preamble ran" in run.log("service_with-preamble")
