"""The plugin docs only mention hooks, commands and options that exist, and document every
hook: a renamed hook or command must fail here, not in a reader's terminal."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from srt_services import hookspecs
from srt_services.cli.main import cli

DOCS = Path(__file__).resolve().parents[3] / "docs"
PAGES = ["plugin-authors.md", "site-admins.md"]

#: ``srt_*`` words in the docs that are deliberately not hooks.
NOT_HOOKS = {
    "srt_services": "the core's import package",
    "srt_my_cache": "the example plugin's import package",
    "srt_my_stack": "the example engine plugin's import package",
    "srt_etcd": "a distribution name spelled with an underscore (normalisation example)",
    "srt_register_kinds": "the misspelled hook in the quarantine example",
}

HOOK_RE = re.compile(r"\bsrt_\w+")
INLINE_CMD_RE = re.compile(r"`(srt(?: [^`]*)?)`")


def hooks() -> set[str]:
    return {name for name in dir(hookspecs) if name.startswith("srt_")}


def fixtures() -> set[str]:
    """The kit's fixtures, which share the ``srt_`` prefix (docs name them too)."""
    from srt_services.testing import pytest_plugin

    return {name for name in dir(pytest_plugin) if name.startswith("srt_")}


def command_lines(text: str) -> list[str]:
    """Every ``srt ...`` invocation: inline code spans and ``$ srt`` lines of console blocks."""
    found = [m.group(1) for m in INLINE_CMD_RE.finditer(text)]
    block: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            block = line[3:].strip() if block is None else None
            continue
        if block in {"console", "shell", "bash"} and line.startswith("$ "):
            command = line[2:].strip()
            if command.startswith("srt ") or command == "srt":
                found.append(command)
    return found


def resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command a word list names, and the words after the command path."""
    command: click.Command = cli
    ctx = click.Context(cli, info_name="srt")
    rest = list(words)
    while rest and isinstance(command, click.Group) and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"`srt {' '.join(words)}`: no command {rest[0]!r}"
        command = sub
        rest.pop(0)
    return command, rest


@pytest.mark.parametrize("page", PAGES)
def test_every_srt_word_is_a_hook_or_fixture(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    known = hooks() | fixtures() | set(NOT_HOOKS)
    unknown = sorted({w for w in HOOK_RE.findall(text) if w not in known})
    assert not unknown, (
        f"{page} mentions {unknown}: neither hooks (srt_services.hookspecs) nor kit fixtures"
    )


def test_every_kit_fixture_is_documented_for_authors() -> None:
    text = (DOCS / "plugin-authors.md").read_text(encoding="utf-8")
    missing = sorted(f for f in fixtures() if f"| `{f}` |" not in text)
    assert not missing, f"kit fixtures missing from the table in plugin-authors.md: {missing}"


def test_every_hook_is_documented_for_authors() -> None:
    text = (DOCS / "plugin-authors.md").read_text(encoding="utf-8")
    missing = sorted(h for h in hooks() if f"`{h}" not in text)
    assert not missing, f"docs/plugin-authors.md does not document {missing}"


#: commands first-party plugins add, with the module that must be importable for them
PLUGIN_COMMANDS = {"metrics": "srt_exporters", "oarbank": "srt_oarbank"}


def _plugin_missing(command: str) -> bool:
    import importlib.util

    module = PLUGIN_COMMANDS.get(command)
    return module is not None and importlib.util.find_spec(module) is None


@pytest.mark.parametrize("page", PAGES)
def test_every_command_and_option_exists(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    lines = command_lines(text)
    assert lines, f"{page} mentions no srt command"
    for line in lines:
        words = line.split()[1:]
        # `srt <name>` stands for any plugin command; cut at the first placeholder.
        words = [w for w in words if not w.startswith(("<", "["))]
        if words and _plugin_missing(words[0]):
            continue  # checked where that plugin is installed (the suite)
        command, rest = resolve(
            words[: next((i for i, w in enumerate(words) if "/" in w or "." in w), len(words))]
        )
        known = {opt for param in command.params for opt in getattr(param, "opts", [])}
        known |= {"-h", "--help"}
        if command is cli:
            known |= {"--version", "-V"}
        for word in rest:
            if word.startswith("-"):
                option = word.split("=", 1)[0]
                assert option in known, f"{page}: `{line}`: {option} is not an option of it"


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| `")]


def test_every_kind_method_and_attribute_has_one_row() -> None:
    """A method listed twice (with two different descriptions) leaves the reader guessing
    which is right; a placement rule that lives in two attributes must say so."""
    from srt_services.contracts.kind import ServiceKind

    rows = _rows((DOCS / "plugin-authors.md").read_text(encoding="utf-8"))
    for name in ("fleet_readiness", "worker_env", "readiness", "service_facts"):
        assert len([r for r in rows if r.startswith(f"| `{name}(")]) == 1, name
    assert hasattr(ServiceKind, "supports_dedicated")
    (row,) = [r for r in rows if r.startswith("| `supports_dedicated`")]
    assert "dedicated" in row.split("|")[2] and "allowed_placements" in row


def test_srt_jobs_results_are_documented() -> None:
    """What ``srt_jobs.run`` returns is what a runtime test asserts on: every public field
    and method of JobRun is named in the authors' page."""
    from dataclasses import fields

    from srt_services.testing.jobs import JobRun

    text = (DOCS / "plugin-authors.md").read_text(encoding="utf-8")
    public = {f.name for f in fields(JobRun) if not f.name.startswith("_")} - {"proc"}
    public -= {"event_offset"}
    methods = {n for n in vars(JobRun) if not n.startswith("_") and callable(vars(JobRun)[n])}
    missing = sorted(n for n in public if f"`{n}`" not in text)
    missing += sorted(n for n in methods if f"`{n}(" not in text)
    assert not missing, f"JobRun's {missing} not in docs/plugin-authors.md"


def test_quick_start_installs_core_before_the_package() -> None:
    """Before core is on the index, ``pip install -e '.[test]'`` fails: the way around it
    must come before that line in the quick start, not a section later."""
    text = (DOCS / "plugin-authors.md").read_text(encoding="utf-8")
    quick = text.split("## Start from the template", 1)[1].split("\n## ", 1)[0]
    assert quick.index("srt_services-") < quick.index("pip install -e '.[test]'")
