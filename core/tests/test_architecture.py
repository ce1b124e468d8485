"""The layers of ``srt_services`` import downwards only, and its packages form no cycle.

Checked on the source: every import counts, also inside functions and ``TYPE_CHECKING``
blocks, so a cycle dodged with a late import fails here too. The layers, bottom up:

=========  ============================================================================
layer      packages
=========  ============================================================================
leaves     ``errors``, ``names``, ``procfs``, ``inotify``, ``gcpause``, ``safefile``,
           ``site_config``
recipe     ``recipe``: the document, its models and problems (no plugin set)
contracts  ``contracts``: what plugins implement and the plan's value types
plugins    ``hookspecs``, ``plugins``: the facade over pluggy
checking   ``checking``: a recipe against the plugin set
runtime    ``plan``, ``probes``, ``kinds``, ``jobdir``, ``logview``, ``launch``, ``supervise``
app        ``builtin`` (core's own plugin), ``app``: the use cases, the composition root
top        ``cli``, ``docs_gen``, ``extend`` (the plugin API), ``testing`` (the kit)
=========  ============================================================================
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "srt_services"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from srt_services import procfs" is srt_services.procfs, not the package
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("srt_services.")}


def _package(module_or_path: str) -> str:
    """``srt_services.plan.resolve`` -> ``plan``; ``gcpause.py`` -> ``gcpause``."""
    part = module_or_path.removeprefix("srt_services.").split(".")[0].split("/")[0]
    return part.removesuffix(".py")


@cache
def _sources() -> dict[Path, set[str]]:
    return {p: _imports(p) for p in sorted(SRC.rglob("*.py")) if "_template" not in p.parts}


@cache
def _package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, modules in _sources().items():
        me = _package(str(path.relative_to(SRC)))
        for module in modules:
            other = _package(module)
            if other != me and other not in ("__version__", "__init__"):
                graph[me][other].append(str(path.relative_to(SRC)))
    return graph


def _cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_packages_form_no_cycle() -> None:
    graph = _package_graph()
    cycle = _cycle(graph)
    if cycle:
        where = [f"{a} -> {b}: {', '.join(graph[a][b][:3])}" for a, b in itertools.pairwise(cycle)]
        pytest.fail("package cycle " + " -> ".join(cycle) + "\n" + "\n".join(where))


#: what each package may import (besides itself); everything else is above it
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "names": frozenset(),
    "procfs": frozenset(),
    "inotify": frozenset(),
    "gcpause": frozenset(),
    "safefile": frozenset({"errors"}),
    "site_config": frozenset({"errors", "safefile"}),
    "recipe": frozenset({"errors", "names", "gcpause"}),
    "contracts": frozenset({"recipe", "errors", "names"}),
    "hookspecs": frozenset({"contracts", "recipe"}),
    "plugins": frozenset({"hookspecs", "contracts", "recipe", "errors", "site_config", "safefile"}),
    "checking": frozenset(
        {"plugins", "contracts", "recipe", "errors", "names", "gcpause", "hookspecs"}
    ),
    "jobdir": frozenset({"contracts", "errors", "procfs", "inotify", "safefile"}),
    "logview": frozenset({"jobdir", "errors", "procfs", "inotify", "safefile"}),
    "kinds": frozenset({"contracts"}),
    "probes": frozenset({"contracts", "recipe", "errors", "safefile"}),
    "plan": frozenset({"checking", "contracts", "plugins", "recipe", "names", "gcpause", "errors"}),
    "launch": frozenset(
        {"contracts", "jobdir", "procfs", "recipe", "errors", "site_config", "names"}
        | {"safefile", "inotify"}
    ),
    "supervise": frozenset(
        {"contracts", "jobdir", "launch", "plan", "probes", "procfs", "recipe", "errors"}
        | {"gcpause", "safefile", "inotify"}
    ),
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_layer_imports_only_what_is_below_it(package: str) -> None:
    graph = _package_graph()
    wrong = {
        other: files
        for other, files in graph.get(package, {}).items()
        if other not in ALLOWED[package]
    }
    assert not wrong, "\n".join(f"{package} imports {o}: {', '.join(f)}" for o, f in wrong.items())


def test_nothing_in_core_imports_the_plugin_api() -> None:
    """``extend`` re-exports what plugins may use; core itself goes to the defining
    modules (only the kit, which plugin authors use beside it, may name it)."""
    users = sorted(
        str(path.relative_to(SRC))
        for path, modules in _sources().items()
        if any(_package(m) == "extend" for m in modules)
        and _package(str(path.relative_to(SRC))) not in ("extend", "testing")
    )
    assert users == []


def test_extend_defines_nothing_it_only_re_exports() -> None:
    """Every module of ``extend`` hands names on; what they are is defined below it."""
    for path in sorted((SRC / "extend").glob("*.py")):
        tree = ast.parse(path.read_text())
        defined = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            and not n.name.startswith("_")
        ]
        assert defined == [], f"{path.relative_to(SRC)} defines {defined}"


@pytest.mark.parametrize(
    "name",
    [
        "builds.py",
        "control.py",
        "exits.py",
        "journal.py",
        "launching.py",
        "readiness.py",
        "restart.py",
        "restarting.py",
        "runs.py",
        "service_ops.py",
        "shutdown.py",
        "signals.py",
    ],
)
def test_what_the_orchestrator_calls_does_not_import_it(name: str) -> None:
    imported = _imports(SRC / "supervise" / name)
    assert not [m for m in imported if m.startswith("srt_services.supervise.orchestrator")]


def test_the_plan_types_import_nothing_of_srt() -> None:
    """What the job directory reads ``plan.json`` with depends on nothing above it."""
    assert _imports(SRC / "contracts" / "plan.py") == set()


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b": ["a.py"]}, "b": {"c": ["b.py"]}, "c": {"a": ["c.py"]}}) == [
        "a",
        "b",
        "c",
        "a",
    ]
    assert _cycle({"a": {"b": ["a.py"]}, "b": {}}) is None
