"""Names are safe: one rule for every user-chosen name; environment names and values.

A service name becomes a step name, a log file name and a work directory, so nothing a
recipe writes may reach outside the job directory.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.errors import RecipeInvalid
from srt_services.testing import kit

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"

BAD_NAMES = [
    pytest.param("../x", "must be a single path-safe token, got '../x'", id="traversal"),
    pytest.param("a/b", "must be a single path-safe token, got 'a/b'", id="slash"),
    pytest.param(".", "must be a single path-safe token, got '.'", id="dot"),
    pytest.param("..", "must be a single path-safe token, got '..'", id="dotdot"),
    pytest.param("-rf", "must not start with '-', got '-rf'", id="leading-dash"),
    pytest.param("a\x00b", "must not contain NUL", id="nul"),
    pytest.param("x" * 4096, "must be at most 63 characters (got 4096)", id="4k"),
    pytest.param("x" * 64, "must be at most 63 characters (got 64)", id="64"),
    pytest.param("rоuter", "may only hold ASCII letters", id="cyrillic-o"),  # noqa: RUF001
    pytest.param("ｒouter", "may only hold ASCII letters", id="fullwidth-r"),  # noqa: RUF001
    pytest.param("a b", "may only hold ASCII letters", id="space"),
    pytest.param("_x", "must start with a letter or digit", id="leading-underscore"),
    pytest.param("a\n", "must not contain a line break", id="trailing-newline"),
    pytest.param("a$(reboot)", "may only hold ASCII letters", id="shell"),
]


def entry_recipe(name: str) -> str:
    return HEAD + f"  - name: {json.dumps(name)}\n    command: [a]\n"


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_service_name_rule(srt_problem, name: str, message: str) -> None:
    p = srt_problem(entry_recipe(name))
    # an unsafe name is never echoed into the label (it could hold NUL or a newline)
    assert p.label == "services[0].name"
    assert message in p.message
    assert (p.line, p.column) == (5, 5)


@pytest.mark.parametrize(("name", "message"), BAD_NAMES)
def test_job_name_has_the_same_rule(srt_problem, name: str, message: str) -> None:
    p = srt_problem(f"schema: 2\nname: {json.dumps(name)}\nfrontend: {{type: none}}\n")
    assert p.label == "name"
    assert message in p.message
    assert (p.line, p.column) == (2, 1)


@pytest.mark.parametrize(("name", "message"), BAD_NAMES[:6])
def test_pool_and_metrics_names_have_the_same_rule(srt_problems, name: str, message: str) -> None:
    found = srt_problems(
        HEAD
        + "  - name: a\n    command: [a]\n"
        + f"    placement: {{pool: {json.dumps(name)}}}\n"
        + f"    metrics: [{{port: 9000, name: {json.dumps(name)}}}, {{port: 9001, name: b}}]\n"
    )
    labels = {p.label: p.message for p in found}
    assert message in labels["services[a].placement.pool"]
    assert message in labels["services[a].metrics[0].name"]


@pytest.mark.parametrize("name", ["a", "etcd", "my-sidecar", "a.b_c-9", "9", "x" * 63, "A1"])
def test_good_names(srt_load, name: str) -> None:
    loaded = srt_load(entry_recipe(name))
    assert loaded.services[0].name == name


def test_the_cli_nodelist_has_the_same_rule(tmp_path, srt_env, python) -> None:
    import subprocess

    recipe = tmp_path / "r.yaml"
    recipe.write_text(entry_recipe("a"))
    out = subprocess.run(
        [python, "-m", "srt_services", "dry-run", str(recipe), "--nodelist", "node0,../x"],
        capture_output=True,
        text=True,
        env=srt_env,
        check=False,
    )
    assert out.returncode == 2
    assert "--nodelist: node name must be a single path-safe token, got '../x'" in out.stderr


# --------------------------------------------------------------------------- environment


def env_recipe(env: str) -> str:
    return HEAD + "  - name: a\n    command: [a]\n    env:\n" + textwrap.indent(env, "      ")


@pytest.mark.parametrize(
    "key",
    ["1A", "A=B", "A-B", "A B", "", "É", "A\n"],
)
def test_env_name_regex(srt_problem, key: str) -> None:
    p = srt_problem(env_recipe(f"{json.dumps(key)}: x\n"))
    assert p.message == (
        f"environment variable names must match [A-Za-z_][A-Za-z0-9_]*; got {key!r}"
    )
    assert (p.line, p.column) == (8, 7)


def test_env_name_with_equals_sign_is_labelled_readably(srt_problem) -> None:
    p = srt_problem(env_recipe('"A=B": x\n'))
    assert p.label == "services[a].env.A=B"


def test_env_name_with_a_newline_does_not_break_the_line(srt_problem) -> None:
    p = srt_problem(env_recipe('"A\\n": x\n'))
    assert p.label == "services[a].env['A\\n']"
    assert "\n" not in p.render("recipe.yaml")


@pytest.mark.parametrize("key", ["SRT_SERVICE_X_NODES", "SRT_FRONTEND_URL", "SRT_"])
def test_reserved_srt_names(srt_problem, key: str) -> None:
    p = srt_problem(env_recipe(f"{key}: x\n"))
    assert p.label == f"services[a].env.{key}"
    assert p.message == "names starting with SRT_ are reserved for srt"
    assert (p.line, p.column) == (8, 7)


@pytest.mark.parametrize("key", ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONSTARTUP"])
def test_loader_variables_are_refused(srt_problem, key: str) -> None:
    p = srt_problem(env_recipe(f"{key}: /opt/x.so\n"))
    assert p.label == f"services[a].env.{key}"
    assert p.message.startswith(f"{key} changes how every program of the service is loaded")
    assert "preamble" in p.message


def test_reserved_names_are_refused_for_roles_too(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f], env: {LD_PRELOAD: /x.so}}
        """
    )
    assert p.label == "frontend.env.LD_PRELOAD"
    assert (p.line, p.column) == (3, 44)


def test_env_value_with_nul(srt_problem) -> None:
    p = srt_problem(env_recipe('A: "x\\0y"\n'))
    assert p.label == "services[a].env.A"
    assert p.message == "environment values must not contain NUL"


@pytest.mark.parametrize(("value", "shown"), [("yes", "true"), ("null", "null"), ("off", "false")])
def test_env_values_are_text_not_yaml_booleans(srt_problem, value: str, shown: str) -> None:
    p = srt_problem(env_recipe(f"A: {value}\n"))
    assert p.message == f"must be text, got {shown}; quote it if you mean the word"


def test_env_numbers_become_text(srt_load) -> None:
    loaded = srt_load(env_recipe("A: 1\nB: 2.5\n"))
    assert loaded.services[0].spec.env == {"A": "1", "B": "2.5"}


# --------------------------------------------------------------------------- property


_plugins = kit.isolated_plugins()


@settings(max_examples=150, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(min_size=0, max_size=80))
def test_any_accepted_name_stays_inside_the_job_directory(name: str) -> None:
    text = entry_recipe(name) + "    placement: {node: all}\n"
    try:
        plan = kit.plan(_plugins, text, 2, job_dir="/jobs/j1", source="recipe.yaml")
    except RecipeInvalid:
        return
    for inst in plan.instances():
        for path in (inst.log, inst.work_dir):
            full = os.path.normpath(os.path.join("/jobs/j1", path))
            assert full.startswith("/jobs/j1/"), path
        assert "/" not in inst.step
        assert not inst.step.startswith("-")
