"""``srt_services.extend`` is the whole plugin API: plugins import nothing else of srt, and
their tests nothing but it and the test kit (``srt_services.testing``)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import srt_services.extend as extend

ROOT = Path(__file__).resolve().parents[3]
SKELETON = ROOT / "core" / "src" / "srt_services" / "_template" / "skeleton"
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def plugin_sources() -> list[Path]:
    """Every module a plugin distribution ships, the template's skeleton included.

    A plugin directory holds one distribution (``plugins/<name>/src``) or several
    (``plugins/<name>/<part>/src``: oarbank's protocol library and its srt adapter).
    """
    files = sorted((ROOT / "plugins").glob("*/src/**/*.py"))
    files += sorted((ROOT / "plugins").glob("*/*/src/**/*.py"))
    files += sorted((SKELETON / "src").glob("**/*.py"))
    return files


def plugin_tests() -> list[Path]:
    """Every module of a plugin's tests (conftest and helpers too), the template's included;
    a plugin directory of several distributions has tests per distribution."""
    files = sorted((ROOT / "plugins").glob("*/tests/**/*.py"))
    files += sorted((ROOT / "plugins").glob("*/*/tests/**/*.py"))
    files += sorted((SKELETON / "tests").glob("**/*.py"))
    return files


def _within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def srt_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ``srt_services`` import in ``path``."""
    # the template's {{Class}} placeholders become names so the file parses
    text = PLACEHOLDER.sub(lambda m: f"T_{m.group(1)}", path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "srt_services" and node.level == 0:
            # "from srt_services import app" is srt_services.app, not the package
            modules = [f"srt_services.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, m) for m in modules if m.split(".")[0] == "srt_services"]
    return found


def test_the_walk_sees_every_plugin() -> None:
    names = {p.relative_to(ROOT).parts[1] for p in plugin_sources()}
    assert {"etcd", "nats", "oarbank"} <= names
    assert any(p.is_relative_to(SKELETON) for p in plugin_sources())


@pytest.mark.parametrize("path", plugin_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_import_only_the_extend_api(path: Path) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for line, module in srt_imports(path)
        if not _within(module, "srt_services.extend")
    ]
    assert not bad, "plugins may import only srt_services.extend:\n" + "\n".join(bad)


def test_the_walk_sees_every_plugins_tests() -> None:
    names = {
        p.relative_to(ROOT).parts[1] for p in plugin_tests() if p.is_relative_to(ROOT / "plugins")
    }
    dirs = [*(ROOT / "plugins").glob("*/tests"), *(ROOT / "plugins").glob("*/*/tests")]
    assert names == {p.relative_to(ROOT).parts[1] for p in dirs}
    assert {"etcd", "nats", "oarbank"} <= names
    assert any(p.is_relative_to(SKELETON) for p in plugin_tests())


@pytest.mark.parametrize("path", plugin_tests(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugin_tests_import_only_the_extend_api_and_the_kit(path: Path) -> None:
    """A plugin's tests see srt as its authors do: the plugin API and the test kit. A name
    they need that neither exports belongs in ``srt_services.testing`` (or, for what plugins
    themselves use, in ``srt_services.extend``), not in an import of srt's internals."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for line, module in srt_imports(path)
        if not _within(module, "srt_services.extend", "srt_services.testing")
    ]
    assert not bad, (
        "plugin tests may import only srt_services.extend and srt_services.testing:\n"
        + "\n".join(bad)
    )


def test_the_boundary_check_catches_an_internal_import(tmp_path: Path) -> None:
    bad = tmp_path / "kind.py"
    bad.write_text(
        "from srt_services.extend import ServiceKind\n"
        "from srt_services.recipe.models import Port\n"
        "import srt_services.launch.process\n",
        encoding="utf-8",
    )
    modules = [m for _, m in srt_imports(bad)]
    assert modules == [
        "srt_services.extend",
        "srt_services.recipe.models",
        "srt_services.launch.process",
    ]


def test_the_tests_boundary_check_catches_an_internal_import(tmp_path: Path) -> None:
    test = tmp_path / "test_kind.py"
    test.write_text(
        "from srt_services.extend import Plan\n"
        "from srt_services.testing import RecipeError, kit\n"
        "from srt_services import app, testing\n"
        "def test_x():\n"
        "    from srt_services.plan.resolve import resolve\n",
        encoding="utf-8",
    )
    outside = [
        m
        for _, m in srt_imports(test)
        if not _within(m, "srt_services.extend", "srt_services.testing")
    ]
    assert outside == ["srt_services.app", "srt_services.plan.resolve"]


@pytest.mark.parametrize("name", extend.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(extend, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        extend.Nope  # noqa: B018


def test_importing_hookimpl_stays_light() -> None:
    """A plugin's entry module imports ``hookimpl`` from here: that must not pay for
    pydantic or the recipe models (srt imports plugins lazily, often over NFS)."""
    code = (
        "import sys\n"
        "from srt_services.extend import hookimpl\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('pydantic', 'srt_services.recipe')))\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_the_lazy_table_and_all_agree() -> None:
    assert sorted(extend._WHERE) == sorted(extend.__all__)


def test_the_restart_backoff_plugins_get_is_the_supervisors() -> None:
    """One restart backoff: ``extend.backoff`` is what srt's supervisor runs, not a copy."""
    from srt_services.contracts.plan import PlannedRestart
    from srt_services.extend import backoff
    from srt_services.supervise import restart

    assert backoff.RestartTracker is restart.RestartTracker
    assert backoff.Decision is restart.Decision
    assert backoff.RestartPolicy is PlannedRestart
    policy = backoff.RestartPolicy(
        policy="always",
        backoff_initial=1.0,
        backoff_max=4.0,
        max_failures=3,
        window=60.0,
        reset_after=8.0,
        jitter=0.0,
    )
    now = [0.0]
    tracker = backoff.RestartTracker(policy, clock=lambda: now[0])
    assert [tracker.on_exit(1, 0.0).delay for _ in range(2)] == [1.0, 2.0]
    assert not tracker.on_exit(1, 0.0).restart
