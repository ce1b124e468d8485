"""Golden dry-run output (text and JSON) of the example recipes.

The plan is a pure function of the recipe, the symbolic allocation and the plugin set (the
built-ins only here), so the output must match byte for byte. After an intended change,
rewrite the files and review the diff::

    SRT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest core/tests/plan/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from srt_services.plan.text import render_plan
from srt_services.testing import kit

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

#: example -> the --nodes it is planned with (None: what the recipe needs)
CASES: dict[str, int | None] = {
    "minimal": None,
    "disagg-services": None,
    "pools": None,
    "per-worker": 2,
}


def _outputs(example: str, nodes: int | None) -> dict[str, str]:
    path = EXAMPLES / f"{example}.yaml"
    # shown as examples/<name>.yaml, so the output does not depend on the checkout's path
    source = f"examples/{example}.yaml"
    plan = kit.plan(kit.isolated_plugins(), path.read_text(), nodes, source=source)
    return {
        f"{example}.txt": render_plan(plan),
        f"{example}.json": plan.to_json(indent=True).decode(),
    }


def _check(name: str, actual: str) -> None:
    target = GOLDEN / name
    if os.environ.get("SRT_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        target.write_text(actual)
        return
    assert target.exists(), f"{target} is missing; run with SRT_UPDATE_GOLDEN=1 to create it"
    expected = target.read_text()
    assert actual == expected, (
        f"dry-run output of {name} changed; review and rewrite with SRT_UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize(("example", "nodes"), list(CASES.items()))
def test_golden(example: str, nodes: int | None) -> None:
    for name, actual in _outputs(example, nodes).items():
        _check(name, actual)


def test_every_golden_file_belongs_to_a_case() -> None:
    expected = {f"{e}.{ext}" for e in CASES for ext in ("txt", "json")}
    present = {p.name for p in GOLDEN.glob("*") if p.suffix in {".txt", ".json"}}
    assert present == expected


@pytest.mark.parametrize(("example", "nodes"), list(CASES.items()))
def test_output_is_stable_across_runs(example: str, nodes: int | None) -> None:
    assert _outputs(example, nodes) == _outputs(example, nodes)
