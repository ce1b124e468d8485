"""The ``srt`` entry point itself: mistyped commands, usage errors, ``-v``, completion."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from srt_services.cli import main as cli_main
from srt_services.plugins import manager
from srt_services.testing import kit


@pytest.fixture(autouse=True)
def builtin_plugins() -> Iterator[None]:
    manager.reset_default(kit.isolated_plugins)
    yield
    manager.reset_default(None)


def srt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        cli_main.main(list(args))
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), out, err


def test_a_mistyped_command_gets_the_closest_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = srt(capsys, "kindz")
    assert code == 2
    assert err.splitlines() == [
        "Usage: srt [OPTIONS] COMMAND [ARGS]...",
        "Try 'srt -h' for help.",
        "",
        "Error: No such command 'kindz'. Did you mean 'kinds'?",
    ]
    code, _, err = srt(capsys, "plugins", "chek")
    assert code == 2
    assert err.endswith("Error: No such command 'chek'. Did you mean 'check'?\n")
    code, _, err = srt(capsys, "frobnicate")
    assert err.endswith("Error: No such command 'frobnicate'.\n")


def test_usage_errors_are_plain_lines_whatever_the_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    (deep / "srt-demo").mkdir()
    (deep / "srt-demo" / "x").write_text("")
    for columns in ("40", "80", "250"):
        monkeypatch.setenv("COLUMNS", columns)
        code, _, err = srt(capsys, "plugins", "new", "demo", "-o", str(deep))
        assert code == 1
        assert err == f"Error: {deep}/srt-demo exists and is not empty (use --force)\n"
        code, _, err = srt(capsys, "plugins", "new", "Bad_Name", "-o", str(deep))
        assert code == 2
        assert all(line == line.rstrip() for line in err.splitlines())
        assert err.splitlines()[-1] == (
            "Error: Invalid value for NAME: lower-case letters and digits, words joined by '-'"
            " (e.g. my-cache)"
        )


def test_verbose_shows_the_traceback_behind_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = tmp_path / "not-a-job"
    job.mkdir()
    code, _, err = srt(capsys, "status", str(job))
    assert code == 1
    assert err == f"srt: {job} is not an srt job directory (no state.json or plan.json)\n"
    code, _, err = srt(capsys, "-v", "status", str(job))
    assert code == 1
    assert "Traceback (most recent call last):" in err
    assert err.endswith(f"srt: {job} is not an srt job directory (no state.json or plan.json)\n")
    # -v lasts one command: the next one in this process is quiet again.
    assert not cli_main.VERBOSE
    assert srt(capsys, "status", str(job))[2].count("\n") == 1


def test_verbose_traces_plugin_hooks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: t\nobservability:\n  metrics: false\nservices:\n  - {name: a, command: [a]}\n"
    )
    code, _, err = srt(capsys, "-v", "validate", str(recipe))
    assert code == 0, err
    assert "srt: srt.plugins: srt-trace: " in err
    assert "srt_implied_services ok" in err
    code, _, err = srt(capsys, "validate", str(recipe))
    assert (code, err) == (0, "")


def _complete(words: str, cword: int) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}
    env.update(_SRT_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword))
    env.update(SRT_DISABLE_PLUGIN_AUTOLOAD="1", SRT_PLUGINS="")
    out = subprocess.run(
        [sys.executable, "-c", "from srt_services.cli.main import main; main()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.splitlines()


def test_shell_completion_as_the_readme_sets_it_up() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    env["_SRT_COMPLETE"] = "bash_source"
    script = subprocess.run(
        [sys.executable, "-c", "from srt_services.cli.main import main; main()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "_srt_completion()" in script
    assert "complete -o nosort -F _srt_completion srt" in script
    assert _complete("srt ki", 1) == ["plain,kinds"]
    assert _complete("srt plugins l", 2) == ["plain,list", "plain,lock"]
    assert "plain,--watch" in _complete("srt status --w", 2)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_H10_non_finite_seconds_are_refused(tmp_path, value: str) -> None:
    """H10: --grace nan (and other non-finite numbers) are usage errors, before any run."""
    import subprocess
    import sys

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: h10\nobservability:\n  metrics: false\nservices:\n  - {name: a, command: [sleep, '1']}\n"
    )
    for args in (
        ["run", str(recipe), "--grace", value],
        ["stop", str(tmp_path), "--timeout", value],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "srt_services", *args],
            check=False,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "srt-jobs").exists()


def test_a_first_party_plugin_command_without_its_plugin_says_what_to_install(
    tmp_path: Path,
) -> None:
    """`srt metrics` without srt-exporters (here: disabled) said only "No such command"."""
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "metrics", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SRT_DISABLED_PLUGINS": "srt-exporters"},
    )
    assert out.returncode == 2
    assert (
        "Error: `srt metrics` comes with the srt-exporters plugin, which is not installed or not"
        " loaded: pip install 'srt-services[exporters]'" in " ".join(out.stderr.split())
    )


def test_kind_names_complete_in_the_shell() -> None:
    env = {**os.environ, "_SRT_COMPLETE": "bash_complete", "COMP_WORDS": "srt kinds gen"}
    out = subprocess.run(
        [sys.executable, "-m", "srt_services"],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "COMP_CWORD": "2"},
    )
    assert out.stdout.splitlines() == ["plain,generic"], out


# A Ctrl-C that lands while the command line's own module is still being imported (before
# its handler exists): the hook below delivers SIGINT to the process at the moment
# rich-click is imported, which only happens inside ``srt_services.cli.main``'s import.
_CTRL_C_DURING_IMPORT = """
import builtins, os, signal, sys
real_import = builtins.__import__
def hooked(name, *args, **kwargs):
    if name == "rich_click" and "rich_click" not in sys.modules:
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = hooked
sys.argv = ["srt", "validate", sys.argv[1]]
{start}
"""


@pytest.mark.parametrize(
    "start",
    [
        "from srt_services.cli.entry import main; main()",  # the console script
        "import runpy; runpy.run_module('srt_services', run_name='__main__')",  # python -m
    ],
    ids=["console-script", "python-m"],
)
def test_ctrl_c_while_the_command_line_loads_exits_130_without_a_traceback(
    tmp_path: Path, start: str
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\nservices: []\n")
    out = subprocess.run(
        [sys.executable, "-c", _CTRL_C_DURING_IMPORT.format(start=start), str(recipe)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr
