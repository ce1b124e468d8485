"""Recipe text to plain Python data, keeping a way back to line and column.

PyYAML's C composer builds the node tree (it is the fast part of ``yaml.load``); we turn
nodes into dicts and lists ourselves, which is quicker than ``SafeConstructor`` and lets us
refuse duplicate keys and alias bombs. Marks are not copied anywhere, and the node tree is
not kept either: it is composed again from the text only when a problem has to be shown
with its line (see :meth:`Document.mark_of`). JSON recipes (generated ones) are parsed by
orjson; on error they are re-read as YAML (JSON is YAML) to find the position.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

from srt_services.recipe.problems import LocatedProblem, Path, RecipeError

try:  # the C parser is ~4x faster; fall back to pure Python where libyaml is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

#: Upper bound on scalars after alias expansion: a recipe is small; a "billion laughs"
#: document is not, and would otherwise hang validation.
MAX_EXPANDED_NODES = 5_000_000

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_SUPPORTED_SCALARS = {_STR, _INT, _FLOAT, _BOOL, _NULL, "tag:yaml.org,2002:timestamp"}
_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}


class _Fail(Exception):
    def __init__(self, message: str, node: yaml.Node | None) -> None:
        super().__init__(message)
        self.message = message
        self.node = node


@dataclass(slots=True)
class Document:
    """Parsed recipe data plus what is needed to point at a position later."""

    source: str
    data: Any
    text: str
    #: parsed by the JSON fast path (a generated recipe), not as YAML
    from_json: bool = False
    _root: yaml.Node | None = None
    _root_ready: bool = False

    def mark_of(self, path: Path) -> tuple[int, int] | None:
        """1-based (line, column) of the deepest existing element of ``path``."""
        root = self._node_tree()
        if root is None:
            return None
        node = root
        best = _mark(root)
        for item in path:
            child = _child(node, item)
            if child is None:
                if item == 0 and isinstance(node, yaml.MappingNode):
                    continue  # one mapping written where a list is accepted (metrics: {...})
                break
            key_node, node = child
            best = _mark(key_node if key_node is not None else node)
        return best

    def _node_tree(self) -> yaml.Node | None:
        if not self._root_ready:
            self._root_ready = True
            try:
                self._root = yaml.compose(self.text, Loader=_Loader)
            except yaml.YAMLError:
                self._root = None
        return self._root


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _child(node: yaml.Node, item: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in _flat_pairs(node):
            if isinstance(key, yaml.ScalarNode) and _scalar_key_matches(key, item):
                return key, value
        return None
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(item, int)
        and 0 <= item < len(node.value)
    ):
        return None, node.value[item]
    return None


def _scalar_key_matches(key: yaml.ScalarNode, item: str | int) -> bool:
    if isinstance(item, int):
        return bool(key.value == str(item))
    return bool(key.value == item)


def _flat_pairs(node: yaml.MappingNode) -> Iterator[tuple[yaml.Node, yaml.Node]]:
    """Pairs of a mapping with ``<<`` merges expanded (explicit keys first, as YAML says)."""
    merged: list[tuple[yaml.Node, yaml.Node]] = []
    for key, value in node.value:
        if key.tag == _MERGE:
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for src in sources:
                if isinstance(src, yaml.MappingNode):
                    merged.extend(_flat_pairs(src))
            continue
        yield key, value
    yield from merged


def _tab_indented(text: str, line: int) -> bool:
    """Whether 0-based ``line`` has a tab in its indentation (YAML forbids that)."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return False
    current = lines[line]
    return "\t" in current[: len(current) - len(current.lstrip(" \t"))]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while large, acyclic structures are built.

    Parsing, checking and planning a 10,000-service recipe allocate millions of containers;
    with the collector on, each of its full passes rescans everything built so far, which
    doubles the run time. Nothing built here is cyclic garbage (what is dropped is freed by
    reference counting). The collector's state is restored as it was found, and nothing is
    moved out of its reach: a long-lived process (the orchestrator, a test run, a program
    embedding srt) must still be able to collect the recipe and plan once it drops them.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parse_text(text: str, source: str) -> Document:
    """Parse YAML or JSON recipe text; raise :class:`RecipeError` on syntax errors."""
    with gc_paused():
        return _parse_text(text, source)


def _parse_text(text: str, source: str) -> Document:
    if text.lstrip().startswith("{") and (
        source.endswith(".json") or not source.endswith((".yaml", ".yml"))
    ):
        try:
            import orjson

            data = orjson.loads(text)
        except ValueError:
            pass  # not valid JSON: the YAML parser gives a better positioned message
        else:
            from srt_services.recipe.bounds import json_has_duplicate_keys

            # orjson keeps the last of two equal keys; the YAML path refuses them by line
            if not json_has_duplicate_keys(text, data):
                return Document(source=source, data=data, text=text, from_json=True)
    root = _compose(text, source)
    # The node tree is dropped once built from: it holds about a hundred tracked objects per
    # service (nodes, marks, their dicts), which every later pass of the garbage collector
    # would walk for as long as the recipe lives; a recipe with problems composes it again.
    if root is None:
        return Document(source=source, data=None, text=text, _root_ready=True)
    try:
        data = _Builder().build(root)
    except _Fail as fail:
        line = col = None
        if fail.node is not None:
            line, col = _mark(fail.node)
        raise RecipeError(
            source, [LocatedProblem("", fail.message, line=line, column=col)]
        ) from None
    except RecursionError:
        raise RecipeError(source, [LocatedProblem("", "recipe is nested too deeply")]) from None
    return Document(source=source, data=data, text=text)


def _compose(text: str, source: str) -> yaml.Node | None:
    """The YAML node tree of ``text``; a syntax error becomes a positioned RecipeError."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = (exc.problem or "syntax error").strip()
        if exc.context:
            problem = f"{problem} ({exc.context.strip()})"
        if mark is not None and _tab_indented(text, mark.line):
            problem += "; YAML does not allow tabs for indentation, use spaces"
        raise RecipeError(
            source,
            [
                LocatedProblem(
                    "",
                    f"YAML syntax error: {problem}",
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                )
            ],
        ) from None
    except yaml.YAMLError as exc:  # e.g. ReaderError: invalid characters
        raise RecipeError(source, [LocatedProblem("", f"cannot read recipe: {exc}")]) from None


class _Builder:
    """Node tree to Python values: plain types only, duplicate keys refused."""

    def __init__(self) -> None:
        self._memo: dict[int, Any] = {}
        self._sizes: dict[int, int] = {}
        self._scalar_ctor = yaml.SafeLoader("")  # reused for the rare non-trivial scalar

    def build(self, node: yaml.Node) -> Any:
        self._check_size(node)
        return self._value(node)

    def _check_size(self, root: yaml.Node) -> None:
        # Logical size with aliases expanded, computed with memoisation so that the check
        # itself stays linear in the number of distinct nodes.
        sizes = self._sizes
        open_nodes: set[int] = set()  # on the current path: seeing one again is a cycle
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            nid = id(node)
            if nid in sizes:
                continue
            if isinstance(node, yaml.ScalarNode):
                sizes[nid] = 1
                continue
            children = (
                [n for pair in node.value for n in pair]
                if isinstance(node, yaml.MappingNode)
                else list(node.value)
            )
            if not done:
                if nid in open_nodes:
                    raise _Fail("an alias refers to a node that contains it (a cycle)", node)
                open_nodes.add(nid)
            if done:
                open_nodes.discard(nid)
                total = 1 + sum(sizes.get(id(c), 1) for c in children)
                if total > MAX_EXPANDED_NODES:
                    raise _Fail(
                        f"recipe expands to more than {MAX_EXPANDED_NODES:,} values"
                        " (alias expansion); refusing to load it",
                        node,
                    )
                sizes[nid] = total
            else:
                stack.append((node, True))
                stack.extend((c, False) for c in children if id(c) not in sizes)

    def _value(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        nid = id(node)
        memo = self._memo
        if nid in memo:
            return memo[nid]
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise _Fail(f"unsupported YAML tag {node.tag}", node)
            result: dict[Any, Any] = {}
            memo[nid] = result
            explicit: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    self._merge(result, value_node, explicit)
                    continue
                key = self._key(key_node)
                if key in explicit:
                    raise _Fail(f"duplicate key {key!r} in mapping", key_node)
                explicit.add(key)
                result[key] = self._value(value_node)
            return result
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise _Fail(f"unsupported YAML tag {node.tag}", node)
            items: list[Any] = []
            memo[nid] = items
            items.extend(self._value(child) for child in node.value)
            return items
        raise _Fail("unsupported YAML node", node)  # pragma: no cover

    def _merge(self, result: dict[Any, Any], value_node: yaml.Node, explicit: set[Any]) -> None:
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for src in sources:
            if not isinstance(src, yaml.MappingNode):
                raise _Fail("a '<<' merge needs a mapping (or a list of mappings)", src)
            for key, value in self._value(src).items():
                if key not in explicit and key not in result:
                    result[key] = value

    def _key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise _Fail("mapping keys must be plain scalars", node)
        key = self._scalar(node)
        if isinstance(key, (list, dict)):
            raise _Fail("mapping keys must be plain scalars", node)  # pragma: no cover
        return key

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        value: str = node.value
        if tag == _STR:
            return value
        if tag == _INT and value.isascii() and value.isdigit() and value[0] != "0":
            try:
                return int(value)
            except ValueError:  # longer than sys.get_int_max_str_digits() allows
                raise _Fail(
                    f"a number of {len(value)} digits is too long"
                    f" (at most {sys.get_int_max_str_digits()})",
                    node,
                ) from None
        return self._other_scalar(node, tag, value)

    def _other_scalar(self, node: yaml.ScalarNode, tag: str, value: str) -> Any:
        """Scalars other than text and plain decimals: null, booleans, YAML 1.1 numbers."""
        if tag == _NULL:
            return None
        if tag == _BOOL:
            flag = _BOOLS.get(value.lower())
            if flag is None:  # only reachable with an explicit !!bool tag
                raise _Fail(f"!!bool value {value!r} is not true or false", node)
            return flag
        if tag not in _SUPPORTED_SCALARS:
            raise _Fail(f"unsupported YAML tag {tag}", node)
        try:
            if tag == _INT:  # YAML 1.1 forms: 0o17, 0x1f, 1_000, 190:20:30
                return self._scalar_ctor.construct_yaml_int(node)
            if tag == _FLOAT:
                return self._scalar_ctor.construct_yaml_float(node)
        except (ValueError, TypeError, IndexError):  # an explicit !!int/!!float on other text
            what = "!!int" if tag == _INT else "!!float"
            raise _Fail(f"{what} value {value!r} is not a number", node) from None
        return value  # timestamps stay text: no recipe field is a date
