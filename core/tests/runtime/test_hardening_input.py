"""Issue 18, item 15: placeholders rendered into a ``preamble`` stay one shell word whatever
they hold, and non-finite numbers are refused wherever srt takes a number.

IDs (docs/fault-matrix.md): H19 (preamble quoting), H20 (non-finite numbers); V05 (command
injection) of the shared matrix is the neighbour these extend.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from srt_services.errors import RecipeInvalid
from srt_services.recipe.shell import ShellValueError, render_shell
from srt_services.testing.jobs import Jobs

HOSTILE = "/tmp/a b/$(touch PWNED)`touch PWNED2`;touch PWNED3 'q\"\\x\ty*"

#: A preamble line per quoting context; each prints the value on a line of its own.
CONTEXTS = [
    'printf "%s\\n" {v}',
    'printf "%s\\n" "{v}"',
    "printf '%s\\n' '{v}'",
    "printf '%s\\n' $'{v}'",
    'printf "%s\\n" "$(printf %s {v})"',
    'printf "%s\\n" "$(printf %s "{v}")"',
    'printf "%s\\n" "`printf %s {v}`"',
    'printf "%s\\n" "`printf %s "{v}"`"',
    'X={v}; printf "%s\\n" "$X"  # {v}',
    "cat <<EOF\n{v}\nEOF",
    "cat <<'EOF'\n{v}\nEOF",
    "cat <<-EOF\n\t{v}\n\tEOF",
    'case x in (x) printf "%s\\n" "{v}";; esac',
    'f() { printf "%s\\n" {v}; }; f',
    # a here-string is no here-document: the next line is plain words again
    'cat <<<x >/dev/null\nprintf "%s\\n" {v}',
    'cat <<< "x" >/dev/null\nprintf "%s\\n" {v}',
]


@pytest.mark.parametrize("line", CONTEXTS)
def test_H19_a_value_is_one_word_in_every_quoting_context(line: str, tmp_path: Path) -> None:
    """H19: bash reads the value back exactly, and runs nothing it holds."""
    script = render_shell(line, {"v": HOSTILE})
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n").lstrip("\t") == HOSTILE
    assert not list(tmp_path.iterdir()), "nothing the value holds was run"


def test_H19_literals_and_the_shells_own_braces_are_left_alone() -> None:
    text = 'echo {{v}} ${HOME} ${X:-x} "{ a; }"'
    assert render_shell(text, {"v": "no"}) == 'echo {v} ${HOME} ${X:-x} "{ a; }"'


def test_H19_a_newline_cannot_go_into_a_here_document() -> None:
    with pytest.raises(ShellValueError, match="here-document"):
        render_shell("cat <<EOF\n{v}\nEOF", {"v": "x\nEOF\nreboot"})


@pytest.mark.parametrize(
    "text",
    ["printf %s \\{v}", "cat <<{v}\nx\n{v}", 'cat << "{v}"\nx\n{v}'],
    ids=["after-backslash", "delimiter", "quoted-delimiter"],
)
def test_H19_a_placeholder_no_quoting_can_protect_is_refused(text: str) -> None:
    """After a backslash the value's opening quote would be escaped; a delimiter is not a
    word bash expands. Either way no quoting keeps the value one word: refused."""
    with pytest.raises(ShellValueError, match="right after a backslash"):
        render_shell(text, {"v": HOSTILE})


def test_H19_a_refused_placeholder_leaves_the_context_of_the_next_one_alone() -> None:
    """A placeholder the scan stepped over once shifted every later one to the context at
    the end of the text (here a plain word, so a double-quoted value got single quotes)."""
    from srt_services.recipe.shell import DOUBLE, UNQUOTABLE, contexts

    text = 'printf %s \\{v} "{w}"'
    assert contexts(text, [text.index("{v}"), text.index("{w}")]) == [
        (UNQUOTABLE, 0),
        (DOUBLE, 0),
    ]


def test_H19_a_job_directory_with_spaces_and_substitutions_works(
    jobs: Jobs, tmp_path: Path
) -> None:
    """H19 end to end: ``srt run`` in a job directory whose name holds a space, ``$(...)``,
    backquotes and a quote; the preamble uses ``{job_dir}``, ``{work_dir}`` and
    ``{log_dir}`` bare and in quotes, and gets each back intact."""
    base = tmp_path / "runs"
    base.mkdir()
    job = base / "my job $(touch pwned) `touch pwned2` it's"
    dump = tmp_path / "seen.json"
    run = jobs.run(
        f"""
        schema: 2
        observability:
          metrics: false
        name: h19
        services:
          - name: show
            terminal: true
            preamble: |
              mkdir -p {{work_dir}}
              cd {{work_dir}}
              A={{job_dir}}
              B="{{log_dir}}"
              C='{{job_dir}}'
              export A B C
            command: [{sys.executable}, -c, "import json,os; json.dump({{k: os.environ[k] for k in 'ABC'}} | {{'cwd': os.getcwd()}}, open({str(dump)!r}, 'w'))"]
        """,
        job_dir=str(job),
    )
    assert run.code == 0, run.stderr
    seen = json.loads(dump.read_text())
    assert seen == {
        "A": str(job),
        "B": f"{job}/logs",
        "C": str(job),
        "cwd": f"{job}/work/service_show",
    }
    made = [p.name for p in tmp_path.rglob("pwned*")]
    assert made == [], "the directory's name was run as a command"


# ------------------------------------------------------------------ non-finite numbers


@pytest.mark.parametrize(
    "entry",
    [
        "readiness: {port: 9, timeout_seconds: .nan}",
        "readiness: {port: 9, interval_seconds: .inf}",
        "stop_grace_seconds: .inf",
        "restart: {jitter: .nan}",
        "restart: {backoff_max_seconds: .inf}",
        "liveness: {port: 9, period_seconds: .nan}",
    ],
)
def test_H20_non_finite_numbers_in_a_recipe_are_refused(
    tmp_path: Path, entry: str, srt_load: Callable[..., Any]
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: h20\nservices:\n  - name: a\n    command: [sleep, '1']\n"
        f"    critical: false\n    {entry}\n"
    )
    with pytest.raises(RecipeInvalid) as err:
        srt_load(recipe)
    assert "r.yaml:7:" in str(err.value)
    assert "finite" in str(err.value) or "less than or equal" in str(err.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1"])
@pytest.mark.parametrize(
    ("module", "option"),
    [
        ("oarbank_protocol.agent.service", ["--reap-period-s", "{value}"]),
        ("oarbank_protocol.agent.service", ["--once-timeout-s", "{value}"]),
        ("oarbank_protocol.agent.service", ["--timeout", "start={value}"]),
        ("oarbank_protocol.agent.node", ["--reap-period-s", "{value}"]),
        ("oarbank_protocol.conformance.cli", ["--ready-timeout-s", "{value}"]),
    ],
)
def test_H20_oarbank_options_refuse_non_finite_numbers(
    module: str, option: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """H20: the plugin's own command lines (argparse's ``type=float`` took ``nan``)."""
    pytest.importorskip("oarbank_protocol")
    import importlib

    parser = importlib.import_module(module).build_parser()
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args([option[0], option[1].format(value=value)])
    assert exit_.value.code == 2
    assert f"argument {option[0]}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_H20_oarbank_admit_command_refuses_non_finite_numbers(value: str) -> None:
    pytest.importorskip("srt_oarbank")
    from click.testing import CliRunner
    from srt_oarbank.srt.cli import admit

    result = CliRunner().invoke(admit, ["--attempt", "a", "--mem-gb", value])
    assert result.exit_code == 2
    assert "finite" in result.output


def test_H20_an_admission_with_a_nan_reserve_is_refused() -> None:
    pytest.importorskip("oarbank_protocol")
    import asyncio

    from oarbank_protocol.agent.control import refuse_constant

    with pytest.raises(ValueError, match="NaN"):
        json.loads('{"attempt_id": "a", "mem_gb": NaN}', parse_constant=refuse_constant)
    from oarbank_protocol.agent.node import NodeAgent
    from oarbank_protocol.errors import AdmissionRefused

    agent = NodeAgent.__new__(NodeAgent)
    for bad in ({"mem_gb": float("nan")}, {"mem_gb": float("inf")}, {"timeout_s": float("nan")}):
        with pytest.raises(AdmissionRefused, match="finite"):
            asyncio.run(agent.admit({"attempt_id": "a1", **bad}))
