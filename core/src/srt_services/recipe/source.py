"""Recipe text to plain Python data, keeping a way back to line and column.

YAML is read as PyYAML's C parser's *event stream* and turned into dicts and lists at once,
never into a node tree: a composed tree costs about 300 bytes per value (each node with two
marks), so a 6 MB recipe of short items took 1.3 GB, where the data itself is a few bytes
per value. So memory follows the data, not the text's markup, and the node and alias
limits below are checked while reading, before anything large exists. Duplicate keys,
alias bombs and cycles are refused, with their line. Marks are not kept: a problem's
``line:col`` is found again by a second streaming pass over the text, one pass for all
the problems shown (:meth:`Document.prefetch_marks`). JSON recipes (generated ones) are
parsed by orjson; on error they are re-read as YAML (JSON is YAML) to find the position.
PyYAML itself (~20 ms to import, most of it compiling its resolver's and reader's patterns)
is imported with the first YAML text, so a JSON recipe's ``srt run`` never loads it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from srt_services.gcpause import gc_paused
from srt_services.recipe.problems import LocatedProblem, Path, RecipeError

if TYPE_CHECKING:
    import yaml

#: Upper bound on values after alias expansion: a recipe is small; a "billion laughs"
#: document is not, and would otherwise hang validation.
MAX_EXPANDED_NODES = 5_000_000
#: A recipe holds at most one value per this many bytes of its text, beyond the first
#: ``VALUES_FLOOR`` values. Real recipes spend 10 to 70 bytes per value (the generated
#: 10,000-service benchmark recipe 9.8, as YAML or JSON); ``[a,a,a,...]`` spends 2, and
#: every value costs tens of bytes once built and hundreds in a validation error, so a
#: dense document is refused before it is validated.
MIN_BYTES_PER_VALUE = 5
VALUES_FLOOR = 20_000
#: Deepest nesting of mappings and lists (real recipes nest about six levels).
MAX_DEPTH = 200
#: Short scalars are shared (one ``str`` for every ``a`` of ``[a, a, a...]``) up to this
#: many distinct ones.
SHARED_SCALARS = 65_536
SHARED_LENGTH = 32

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

Mark = tuple[int, int]


class _Fail(Exception):
    def __init__(self, message: str, mark: Mark | None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


@cache
def _loader() -> type[Any]:
    """PyYAML's C parser when this build has it (~4x faster), else the pure-Python one."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _mark(event: Any) -> Mark:
    return event.start_mark.line + 1, event.start_mark.column + 1


@dataclass(slots=True)
class Document:
    """Parsed recipe data plus what is needed to point at a position later."""

    source: str
    data: Any
    text: str
    #: parsed by the JSON fast path (a generated recipe), not as YAML
    from_json: bool = False
    _marks: dict[tuple[str, ...], Mark] = field(default_factory=dict)
    _kinds: dict[tuple[str, ...], str] = field(default_factory=dict)
    _asked: set[tuple[str, ...]] = field(default_factory=set)

    def prefetch_marks(self, paths: list[Path]) -> None:
        """Find the marks of every path in ``paths`` in one pass over the text."""
        wanted: set[tuple[str, ...]] = set()
        for path in paths:
            for variant in _variants(path):
                for n in range(len(variant) + 1):
                    wanted.add(variant[:n])
        if wanted <= self._asked:
            return
        # the walk prunes below every path not wanted, so every ancestor stays in the set
        # even when an earlier pass asked for it already
        self._asked |= wanted
        import yaml

        try:
            _find_marks(self.text, wanted, self._marks, self._kinds)
        except yaml.YAMLError:
            pass

    def mark_of(self, path: Path) -> Mark | None:
        """1-based (line, column) of the deepest existing element of ``path``."""
        self.prefetch_marks([path])
        cur: tuple[str, ...] = ()
        best = self._marks.get(cur)
        for item in path:
            cand = (*cur, str(item))
            if cand in self._marks:
                cur = cand
                best = self._marks[cand]
            elif item == 0 and self._kinds.get(cur) == "map":
                continue  # one mapping written where a list is accepted (metrics: {...})
            else:
                break
        return best


@dataclass(slots=True)
class TranslatedDocument(Document):
    """A document another tool's recipe was translated into (a recipe format): its data is
    the translation, and every position is the original's, found through ``origin`` (a
    path of the translation -> the path of the original it came from). So a problem with a
    translated value is shown at the line the user wrote."""

    original: Document | None = None
    origin: Callable[[Path], Path] | None = None

    def _back(self, path: Path) -> Path:
        return self.origin(path) if self.origin is not None else path

    def prefetch_marks(self, paths: list[Path]) -> None:
        if self.original is not None:
            self.original.prefetch_marks([self._back(p) for p in paths])

    def mark_of(self, path: Path) -> Mark | None:
        if self.original is None:
            return None
        return self.original.mark_of(self._back(path))


def _variants(path: Path) -> list[tuple[str, ...]]:
    """``path`` as text, and without each ``0`` (a mapping written for a one-item list)."""
    text = tuple(str(p) for p in path)
    out = [text]
    for i, item in enumerate(path):
        if item == 0 and not isinstance(item, bool):
            out.append(text[:i] + text[i + 1 :])
    return out


def _find_marks(
    text: str,
    wanted: set[tuple[str, ...]],
    marks: dict[tuple[str, ...], Mark],
    kinds: dict[tuple[str, ...], str],
) -> None:
    """Walk the event stream; note the mark (a mapping entry: its key's) and the kind of
    every element whose path is in ``wanted``."""
    # frames: [path, is_map, next index or None, pending key, key mark]
    import yaml

    frames: list[list[Any]] = []
    for ev in yaml.parse(text, Loader=_loader()):
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frames.pop()
            continue
        if not isinstance(
            ev, (yaml.ScalarEvent, yaml.AliasEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)
        ):
            continue
        if frames:
            frame = frames[-1]
            if frame[1]:  # a mapping: keys and values alternate
                if frame[3] is None:
                    frame[3] = ev.value if isinstance(ev, yaml.ScalarEvent) else "?"
                    frame[4] = _mark(ev)
                    if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                        frames.append([None, isinstance(ev, yaml.MappingStartEvent), 0, None, None])
                    continue
                path = (*frame[0], frame[3]) if frame[0] is not None else None
                where = frame[4]
                frame[3] = None
            else:
                path = (*frame[0], str(frame[2])) if frame[0] is not None else None
                frame[2] += 1
                where = _mark(ev)
        else:
            path, where = (), _mark(ev)
        if path is not None and path in wanted:
            marks.setdefault(path, where)
            kinds.setdefault(
                path,
                "map"
                if isinstance(ev, yaml.MappingStartEvent)
                else "seq"
                if isinstance(ev, yaml.SequenceStartEvent)
                else "scalar",
            )
        else:
            path = None  # not wanted: nothing below it is either
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            frames.append([path, isinstance(ev, yaml.MappingStartEvent), 0, None, None])


def _tab_indented(text: str, line: int) -> bool:
    """Whether 0-based ``line`` has a tab in its indentation (YAML forbids that)."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return False
    current = lines[line]
    return "\t" in current[: len(current) - len(current.lstrip(" \t"))]


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

            most = max_values(len(text))
            if len(text) // 2 > most and not _count_values(data, most):
                raise RecipeError(source, [LocatedProblem("", _too_dense(len(text), most))])
            # orjson keeps the last of two equal keys; the YAML path refuses them by line
            if not json_has_duplicate_keys(text, data):
                return Document(source=source, data=data, text=text, from_json=True)
    import yaml

    try:
        data = _Builder(text).build()
    except _Fail as fail:
        line, col = fail.mark if fail.mark is not None else (None, None)
        raise RecipeError(
            source, [LocatedProblem("", fail.message, line=line, column=col)]
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(text, source, exc) from None
    except yaml.YAMLError as exc:  # e.g. ReaderError: invalid characters
        raise RecipeError(source, [LocatedProblem("", f"cannot read recipe: {exc}")]) from None
    return Document(source=source, data=data, text=text)


#: What the parser was inside of when it names where that began: a bracket or quote that
#: is still open when the parser gives up on a later line was never closed.
_OPENERS = {
    "while parsing a flow mapping": "'{'",
    "while parsing a flow sequence": "'['",
    "while scanning a quoted scalar": "quote",
}


def _syntax_error(text: str, source: str, exc: yaml.MarkedYAMLError) -> RecipeError:
    mark = exc.problem_mark or exc.context_mark
    problem = (exc.problem or "syntax error").strip()
    if exc.context:
        problem = f"{problem} ({exc.context.strip()})"
    opened = _OPENERS.get((exc.context or "").strip())
    start, end = exc.context_mark, exc.problem_mark
    if opened is not None and start is not None and end is not None and end.line > start.line:
        # The parser only notices a missing `}` where it runs out of ways to go on, often
        # the end of the file; where the user must look is the bracket that stays open.
        problem += (
            f": the {opened} opened here is never closed"
            f" (the parser gave up at {end.line + 1}:{end.column + 1})"
        )
        mark = start
    if mark is not None and _tab_indented(text, mark.line):
        problem += "; YAML does not allow tabs for indentation, use spaces"
    return RecipeError(
        source,
        [
            LocatedProblem(
                "",
                f"YAML syntax error: {problem}",
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )
        ],
    )


def max_values(size: int) -> int:
    """How many values a recipe of ``size`` bytes may hold (see ``MIN_BYTES_PER_VALUE``)."""
    return VALUES_FLOOR + size // MIN_BYTES_PER_VALUE


def _too_dense(size: int, most: int) -> str:
    return (
        f"recipe holds more than {most:,} values in {size:,} bytes (srt allows one per"
        f" {MIN_BYTES_PER_VALUE} bytes beyond the first {VALUES_FLOOR:,}: real recipes use"
        " 10 or more); refusing to load it"
    )


def _count_values(data: Any, most: int) -> bool:
    """Whether ``data`` (parsed JSON) holds at most ``most`` values."""
    count = 0
    todo = [data]
    while todo:
        item = todo.pop()
        count += 1
        if count > most:
            return False
        if isinstance(item, dict):
            count += len(item)  # the keys
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return count <= most


class _Open:
    """A mapping or list being built from the events between its start and end."""

    __slots__ = ("anchor", "explicit", "is_map", "key", "key_mark", "mark", "size", "value")

    def __init__(self, value: Any, is_map: bool, anchor: str | None, mark: Mark) -> None:
        self.value = value
        self.is_map = is_map
        self.anchor = anchor
        self.mark = mark
        self.size = 1
        #: a mapping's next key (``_NO_KEY`` while a key is expected)
        self.key: Any = _NO_KEY
        self.key_mark: Mark | None = None
        #: keys written in the mapping itself (a merge never overrides them)
        self.explicit: set[Any] = set()


_NO_KEY = object()
_MERGE_KEY = object()


class _Builder:
    """Event stream to Python values: plain types only, duplicate keys refused, aliases
    shared (never copied) and counted as if expanded."""

    def __init__(self, text: str) -> None:
        import yaml

        self.text = text
        self._loader = yaml.SafeLoader("")  # tag resolution and the rare non-trivial scalar
        self._scalar_node = yaml.ScalarNode
        self._mapping_start = yaml.MappingStartEvent
        self._anchors: dict[str, tuple[Any, int]] = {}
        self._open_anchors: set[str] = set()
        self._shared: dict[str, str] = {}
        self._total = 0
        self._documents = 0

    def build(self) -> Any:
        # the document's value goes into a list that stands for the stream, so every value
        # has an open collection to go into: no "is this the root?" test per value
        stream = _Open([], False, None, (1, 1))
        stack: list[_Open] = [stream]
        values = 0
        most = max_values(len(self.text))
        import yaml

        for ev in yaml.parse(self.text, Loader=_loader()):
            if isinstance(ev, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
                values += 1
                if values > most:
                    raise _Fail(_too_dense(len(self.text), most), _mark(ev))
            if isinstance(ev, yaml.ScalarEvent):
                value, size = self._scalar_event(ev), 1
                if ev.anchor is not None:
                    self._anchors[ev.anchor] = (value, 1)
            elif isinstance(ev, yaml.AliasEvent):
                value, size = self._alias(ev)
            elif isinstance(ev, yaml.CollectionStartEvent):
                stack.append(self._start(ev, stack))
                continue
            elif isinstance(ev, yaml.CollectionEndEvent):
                self._end(stack)
                continue
            elif isinstance(ev, yaml.DocumentStartEvent):
                self._document_start(ev)
                continue
            else:
                continue
            self._count(size, ev)
            self._add(stack[-1], value, size, ev, _mark(ev))
        return stream.value[0] if stream.value else None

    def _document_start(self, ev: Any) -> None:
        self._documents += 1
        if self._documents > 1:
            raise _Fail(
                "expected a single document in the stream, but found another document",
                _mark(ev),
            )

    def _end(self, stack: list[_Open]) -> None:
        """Close the innermost collection: it is its anchor's value from now on, and a
        value of the collection around it."""
        done = stack.pop()
        if done.anchor is not None:
            self._open_anchors.discard(done.anchor)
            self._anchors[done.anchor] = (done.value, done.size)
        self._add(stack[-1], done.value, done.size, None, done.mark)

    def _count(self, size: int, ev: Any) -> None:
        self._total += size
        if self._total > MAX_EXPANDED_NODES:
            raise _Fail(
                f"recipe expands to more than {MAX_EXPANDED_NODES:,} values"
                " (alias expansion); refusing to load it",
                _mark(ev),
            )

    def _start(self, ev: Any, stack: list[_Open]) -> _Open:
        is_map = isinstance(ev, self._mapping_start)
        tag = ev.tag
        if tag is not None and tag not in ("!", _MAP if is_map else _SEQ):
            raise _Fail(f"unsupported YAML tag {tag}", _mark(ev))
        if len(stack) > MAX_DEPTH:  # the stream's list and MAX_DEPTH collections are open
            raise _Fail("recipe is nested too deeply", _mark(ev))
        if stack[-1].is_map and stack[-1].key is _NO_KEY:
            raise _Fail("mapping keys must be plain scalars", _mark(ev))
        if ev.anchor is not None:
            self._open_anchors.add(ev.anchor)
        self._count(1, ev)
        return _Open({} if is_map else [], is_map, ev.anchor, _mark(ev))

    def _alias(self, ev: Any) -> tuple[Any, int]:
        if ev.anchor in self._open_anchors:
            raise _Fail("an alias refers to a node that contains it (a cycle)", _mark(ev))
        found = self._anchors.get(ev.anchor)
        if found is None:
            raise _Fail(f"found undefined alias {ev.anchor!r}", _mark(ev))
        return found

    def _add(self, into: _Open, value: Any, size: int, ev: Any, mark: Mark) -> None:
        into.size += size
        if not into.is_map:
            into.value.append("<<" if value is _MERGE_KEY else value)
            return
        if into.key is _NO_KEY:  # this value is a key
            if value is _MERGE_KEY:
                into.key = _MERGE_KEY
            elif isinstance(value, (list, dict)):
                raise _Fail("mapping keys must be plain scalars", mark)
            else:
                if value in into.explicit:
                    raise _Fail(f"duplicate key {value!r} in mapping", mark)
                into.explicit.add(value)
                into.key = value
            into.key_mark = mark
            return
        key, into.key = into.key, _NO_KEY
        if key is _MERGE_KEY:
            self._merge(into, value, mark)
            return
        into.value[key] = "<<" if value is _MERGE_KEY else value

    def _merge(self, into: _Open, value: Any, mark: Mark) -> None:
        sources = value if isinstance(value, list) else [value]
        for src in sources:
            if not isinstance(src, dict):
                raise _Fail("a '<<' merge needs a mapping (or a list of mappings)", mark)
            for key, item in src.items():
                if key not in into.explicit and key not in into.value:
                    into.value[key] = item

    def _scalar_event(self, ev: Any) -> Any:
        value: str = ev.value
        tag = ev.tag
        if tag is None or tag == "!":
            tag = (
                _STR if tag == "!" else self._loader.resolve(self._scalar_node, value, ev.implicit)  # type: ignore[no-untyped-call]
            )
        if tag == _STR:
            if len(value) <= SHARED_LENGTH:
                shared = self._shared.get(value)
                if shared is not None:
                    return shared
                if len(self._shared) < SHARED_SCALARS:
                    self._shared[value] = value
            return value
        if tag == _INT and value.isascii() and value.isdigit() and value[0] != "0":
            try:
                return int(value)
            except ValueError:  # longer than sys.get_int_max_str_digits() allows
                raise _Fail(
                    f"a number of {len(value)} digits is too long"
                    f" (at most {sys.get_int_max_str_digits()})",
                    _mark(ev),
                ) from None
        return self._other_scalar(ev, tag, value)

    def _other_scalar(self, ev: Any, tag: str, value: str) -> Any:
        """Scalars other than text and plain decimals: null, booleans, YAML 1.1 numbers."""
        if tag == _NULL:
            return None
        if tag == _BOOL:
            flag = _BOOLS.get(value.lower())
            if flag is None:  # only reachable with an explicit !!bool tag
                raise _Fail(f"!!bool value {value!r} is not true or false", _mark(ev))
            return flag
        if tag == _MERGE:
            return _MERGE_KEY  # ``<<`` as a key merges; anywhere else it is the text "<<"
        if tag not in _SUPPORTED_SCALARS:
            raise _Fail(f"unsupported YAML tag {tag}", _mark(ev))
        node = self._scalar_node(tag, value, ev.start_mark, ev.end_mark, ev.style)
        try:
            if tag == _INT:  # YAML 1.1 forms: 0o17, 0x1f, 1_000, 190:20:30
                return self._loader.construct_yaml_int(node)
            if tag == _FLOAT:
                return self._loader.construct_yaml_float(node)
        except (ValueError, TypeError, IndexError):  # an explicit !!int/!!float on other text
            what = "!!int" if tag == _INT else "!!float"
            raise _Fail(f"{what} value {value!r} is not a number", _mark(ev)) from None
        return value  # timestamps stay text: no recipe field is a date
