"""One verdict: what ``srt dry-run`` refuses, ``srt validate`` refuses too, with the line.

``validate`` plans each recipe on the smallest symbolic allocation that fits it, so a CI
job that only validates catches plan-time problems (a port two services listen on, a
placement that selects no nodes); and an unknown top-level key no longer hides the
problems of the rest of the recipe.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from srt_services.cli.main import main
from srt_services.plugins import manager
from srt_services.testing import kit


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def builtin_plugins(srt_isolated_env: Path) -> Iterator[None]:
    manager.reset_default(kit.isolated_plugins)
    yield
    manager.reset_default(None)


def srt(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    code = info.value.code
    return Result(code if isinstance(code, int) else 1, out, err)


PORTS = """\
schema: 2
name: t
services:
  - name: a
    command: [x]
    readiness: {port: 9000}
  - name: b
    command: [x]
    readiness: {port: 9000}
  - name: c
    command: [x]
    placement: {node: decode}
"""


def test_plan_time_problems_fail_validate_as_they_fail_dry_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PORTS)
    checked = srt(capsys, "validate", str(recipe))
    planned = srt(capsys, "dry-run", str(recipe))
    assert checked.code == planned.code == 2
    assert checked.err == planned.err
    lines = checked.err.splitlines()
    assert lines == [
        f"{recipe}:9:5: services[b].readiness: services[a] and services[b] both listen on"
        " port 9000 on node node0; give them disjoint placements or ports",
        f"{recipe}:12:5: services[c].placement: placement decode selects no nodes in this job",
        f"{recipe}: 2 errors",
    ]
    assert "ok" not in checked.out


def test_json_and_github_reports_carry_plan_problems_with_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(PORTS)
    report = json.loads(srt(capsys, "validate", "--format", "json", str(recipe)).out)
    assert [(p["line"], p["field"]) for p in report[0]["problems"]] == [
        (9, "services[b].readiness"),
        (12, "services[c].placement"),
    ]
    github = srt(capsys, "validate", "--format", "github", str(recipe)).out
    assert "::error file=" in github and ",line=9,col=5," in github


def test_a_valid_recipe_is_planned_silently_and_implied_skips_are_warnings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "ok.yaml"
    recipe.write_text(
        PORTS.replace("9000}\n  - name: c", "9001}\n  - name: c").rsplit("  - name: c", 1)[0]
    )
    result = srt(capsys, "validate", str(recipe))
    assert result.code == 0, result.err
    assert result.out == f"{recipe}: ok (2 service(s))\n"


def test_an_unknown_top_level_key_no_longer_hides_the_other_sections(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: t\nfrontend: {type: none}\nservcies: []\nservices:\n"
        "  - name: a\n    type: genric\n  - name: b\n    command: [x, '{nod}']\n"
    )
    result = srt(capsys, "validate", str(recipe))
    assert result.code == 2
    lines = result.err.splitlines()
    assert lines[0].startswith(f"{recipe}:4:1: servcies: unknown key; did you mean 'services'?")
    assert lines[1].startswith(f"{recipe}:7:5: services[a].type: service type 'genric' is not")
    assert lines[2].startswith(
        f"{recipe}:9:18: services[b].command[1]: unknown placeholder {{nod}}"
    )
    assert lines[3] == f"{recipe}: 3 errors"


def test_an_unknown_top_level_key_beside_a_broken_entry_still_checks_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: t\nfrontend: {type: none}\nextra: 1\nservices:\n"
        "  - name: a\n    command: [x]\n    bogus: 1\n  - name: b\n    command: [x, '{nod}']\n"
    )
    lines = srt(capsys, "validate", str(recipe)).err.splitlines()
    assert [line.split(": ")[1] for line in lines[:-1]] == [
        "extra",
        "services[a].bogus",
        "services[b].command[1]",
    ]
