"""The layers import downwards only: the job directory, the /proc readers and the plan's
value types below everything, ``launch`` below ``supervise``, and inside ``supervise`` the
orchestrator above the builds and the shutdown it calls. Checked on the source (every import,
also inside functions and ``TYPE_CHECKING`` blocks), so a cycle dodged with a late import
fails here too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "srt_services"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from srt_services import procfs" is srt_services.procfs, not the package
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("srt_services")}


def _files(*parts: str) -> list[Path]:
    root = SRC.joinpath(*parts)
    return sorted(root.rglob("*.py")) if root.is_dir() else [root]


def _offenders(files: list[Path], allowed: tuple[str, ...]) -> list[str]:
    out = []
    for path in files:
        for module in sorted(_imports(path)):
            if not module.startswith(allowed):
                out.append(f"{path.relative_to(SRC)} imports {module}")
    return out


#: The bottom layer: the job directory, /proc, srt's errors, and the plan's value types
#: (``plan.json`` has one schema, the plan's own, which the job directory reads).
BOTTOM = (
    "srt_services.jobdir",
    "srt_services.procfs",
    "srt_services.errors",
    "srt_services.contracts.plan",
)


@pytest.mark.parametrize("part", ["jobdir", "procfs.py", "errors.py", "contracts/plan.py"])
def test_the_bottom_layer_imports_only_the_bottom_layer(part: str) -> None:
    assert _offenders(_files(part), BOTTOM) == []


def test_the_plan_types_import_nothing_of_srt() -> None:
    """What the job directory reads ``plan.json`` with depends on nothing above it."""
    assert _imports(SRC / "contracts" / "plan.py") == set()


def test_launch_does_not_import_supervise() -> None:
    offenders = [
        f"{path.relative_to(SRC)} imports {module}"
        for path in _files("launch")
        for module in sorted(_imports(path))
        if module.startswith("srt_services.supervise")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "name",
    [
        "builds.py",
        "shutdown.py",
        "readiness.py",
        "runs.py",
        "restart.py",
        "control.py",
        "service_ops.py",
    ],
)
def test_what_the_orchestrator_calls_does_not_import_it(name: str) -> None:
    imported = _imports(SRC / "supervise" / name)
    assert not [m for m in imported if m.startswith("srt_services.supervise.orchestrator")]
