"""oarbank-protocol stands on its own: no module of it (or of its tests) imports srt.

The library is for any agent of service protocol 1; srt is one host of it, through the
srt-oarbank adapter, which depends on the library and never the other way round. An import
of ``srt_services`` (or of the adapter, ``srt_oarbank``) anywhere here, even inside a
function or under ``TYPE_CHECKING``, fails this test before it fails a user without srt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = frozenset({"srt_services", "srt_oarbank"})


def sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))


def srt_imports(path: Path) -> list[str]:
    """``line: module`` for every import of a forbidden top-level package in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules if m.split(".")[0] in FORBIDDEN]
    return found


def test_the_walk_sees_the_whole_library() -> None:
    src = ROOT / "src"
    names = {p.relative_to(src).parts[1] for p in sources() if p.is_relative_to(src)}
    assert {"execution", "lifecycle", "agent", "conformance", "documents.py"} <= names


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_imports_srt(path: Path) -> None:
    assert srt_imports(path) == [], f"{path.relative_to(ROOT)} imports srt"


def test_the_walk_catches_every_form_of_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\n"
        "import srt_services\n"
        "from srt_services.extend import processes\n"
        "def later() -> None:\n"
        "    import srt_oarbank.srt.kind\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    assert srt_imports(bad) == [
        "2: srt_services",
        "3: srt_services.extend",
        "5: srt_oarbank.srt.kind",
    ]
