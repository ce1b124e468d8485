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
