"""A translated recipe written as YAML with the original's comments where they belong.

``srt migrate --from <format>`` writes the schema-2 recipe another tool's recipe translates
into. The structure changes (``resources.prefill_nodes`` becomes ``roles.prefill.nodes``),
so a textual rewrite cannot keep the comments; instead each key of the translation is traced
back to the key it came from (the format's ``origin``), and the comments that stood at that
key in the original (ruamel.yaml's round-trip mode keeps them on the key) are attached to
the new one. A comment is carried once: where several keys come from one original key, the
first keeps it. The file's opening comment block stays on top.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from srt_services.recipe.problems import Path

Origin = Callable[[Path], Path]


def commented_yaml(original_text: str, data: dict[str, Any], origin: Origin, header: str) -> str:
    """``data`` as YAML, each key with the comments of the original key it came from, and
    ``header`` (comment lines, without ``#``) above everything."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        tree = yaml.load(original_text)
    except Exception:
        tree = None
    carried: set[int] = set()
    out = _build(data, (), tree, origin, carried)
    if isinstance(out, CommentedMap):
        lines = [*header.splitlines(), ""]
        opening = _opening(tree)
        out.yaml_set_start_comment("\n".join([*lines, *opening]) if opening else "\n".join(lines))
    buffer = io.StringIO()
    writer = YAML()
    writer.default_flow_style = False
    writer.width = 100
    writer.indent(mapping=2, sequence=4, offset=2)
    writer.dump(out, buffer)
    return buffer.getvalue()


def _build(value: Any, path: Path, tree: Any, origin: Origin, carried: set[int]) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        out = CommentedMap()
        for key, item in value.items():
            out[key] = _build(item, (*path, key), tree, origin, carried)
            _carry(out, key, origin((*path, key)), tree, carried)
        return out
    if isinstance(value, list):
        seq = CommentedSeq()
        for i, item in enumerate(value):
            seq.append(_build(item, (*path, i), tree, origin, carried))
        return seq
    return value


def _carry(out: Any, key: str, source: Path, tree: Any, carried: set[int]) -> None:
    """The comment tokens of ``source``'s key in the original, onto ``key`` of ``out``."""
    if not source:
        return
    if isinstance(out[key], dict | list) != isinstance(_at(tree, source), dict | list):
        return  # a comment on a value's line belongs to a value of the same shape
    parent = _at(tree, source[:-1])
    ca = getattr(parent, "ca", None)
    if ca is None:
        return
    tokens = ca.items.get(source[-1])
    if not tokens or id(tokens) in carried:
        return
    carried.add(id(tokens))
    out.ca.items[key] = tokens


def _at(tree: Any, path: Path) -> Any:
    node = tree
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _opening(tree: Any) -> list[str]:
    """The original's comment lines above its first key."""
    ca = getattr(tree, "ca", None)
    if ca is None or not ca.comment or len(ca.comment) < 2 or not ca.comment[1]:
        return []
    out = []
    for token in ca.comment[1]:
        for line in token.value.splitlines():
            text = line.strip()
            out.append(text[1:].strip() if text.startswith("#") else text)
    return out
