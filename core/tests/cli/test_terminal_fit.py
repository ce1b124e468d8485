"""On an 80-column terminal no line of a table is longer than the terminal, so nothing is
wrapped mid-word by the terminal itself. Run with the plugins of the test environment, so
their long readiness texts and names are part of what must fit."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}


@pytest.mark.parametrize("args", [("kinds",), ("plugins", "list", "--all")])
@pytest.mark.parametrize("columns", [60, 80])
def test_tables_fit_the_terminal(
    on_terminal: Callable[..., str], args: tuple[str, ...], columns: int
) -> None:
    out = on_terminal(columns, *args, env=env())
    lines = out.splitlines()
    assert lines, out
    too_long = [line for line in lines if len(line) > columns]
    assert not too_long, out
    header = "TYPE" if args[0] == "kinds" else "PLUGIN"
    assert any(line.startswith(header + " ") for line in lines), out
