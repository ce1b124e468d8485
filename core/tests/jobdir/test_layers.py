"""The layers import downwards only: the job directory and /proc readers below everything,
``launch`` below ``supervise``, and inside ``supervise`` the orchestrator above the builds
and the shutdown it calls. Checked on the source (every import, also inside functions and
``TYPE_CHECKING`` blocks), so a cycle dodged with a late import fails here too."""

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


@pytest.mark.parametrize("part", ["jobdir", "procfs.py"])
def test_the_bottom_layer_imports_only_the_bottom_layer(part: str) -> None:
    allowed = ("srt_services.jobdir", "srt_services.procfs", "srt_services.errors")
    assert _offenders(_files(part), allowed) == []


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
