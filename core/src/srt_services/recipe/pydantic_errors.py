"""Pydantic validation errors as recipe problems, in our words.

Pydantic's messages are written for Python programmers ("Input should be a valid
integer"); recipe authors get the field path, what was wrong and, for an unknown key, the
closest known one.
"""

from __future__ import annotations

import types
import typing
from difflib import get_close_matches
from typing import Any

from pydantic import BaseModel, ValidationError

from srt_services.recipe.models import SCALAR_RULES
from srt_services.recipe.problems import Path, PathItem, Problem, ProblemList
from srt_services.recipe.validation import ELIDED, bounded_errors

_TYPE_WORDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(annotation: Any) -> list[Any]:
    """Candidate model classes reachable from an annotation (through Optional/list/dict)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return _unwrap(args[0]) if args else []
    if origin is dict:
        args = typing.get_args(annotation)
        return _unwrap(args[1]) if len(args) == 2 else []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def model_at(root: type[BaseModel], path: Path) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``path`` (best effort)."""
    current: type[BaseModel] | None = root
    skip_key = False
    for item in path:
        if skip_key:  # the key of a dict of models
            skip_key = False
            continue
        if isinstance(item, int):  # a list index
            continue
        if current is None:
            return None
        fields = current.model_fields
        field = fields.get(str(item)) or next((f for f in fields.values() if f.alias == item), None)
        if field is None:
            return None
        candidates = _unwrap(field.annotation)
        current = candidates[0] if candidates else None
        skip_key = _is_dict_of_models(field.annotation)
    return current


def _is_dict_of_models(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_dict_of_models(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_dict_of_models(a) for a in typing.get_args(annotation))
    return origin is dict and bool(_unwrap(annotation))


def field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def shape_problems(
    failed: ValidationError,
    root: type[BaseModel],
    data: Any,
    prefix: Path = (),
    extra_known: list[str] | None = None,
) -> ProblemList:
    """The problems of ``data``, which ``failed`` :func:`~srt_services.recipe.validation.validate`
    against ``root``: the first ones built, the others counted (see that module)."""
    exc, more = bounded_errors(root, data)
    out = ProblemList(problems_from(exc or failed, root, prefix, extra_known))
    out.count_more(more)
    return out


def problems_from(
    exc: ValidationError,
    root: type[BaseModel],
    prefix: Path = (),
    extra_known: list[str] | None = None,
) -> list[Problem]:
    out: list[Problem] = []
    for err in exc.errors(include_url=False):
        if err["type"] == ELIDED:  # stands for problems counted elsewhere
            continue
        loc: list[PathItem] = []
        key_error = False
        for item in err["loc"]:
            if item == "[key]":
                key_error = True
                continue
            if isinstance(item, str) and (item.startswith("function-") or "[" in item):
                continue
            loc.append(item)
        path = prefix + tuple(loc)
        out.append(Problem(path, _message(err, root, tuple(loc), key_error, extra_known)))
    return out


def _message(
    err: Any, root: type[BaseModel], loc: Path, key_error: bool, extra_known: list[str] | None
) -> str:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return _unknown_key(root, loc, extra_known)
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        expected = expected.replace("'", "").replace(" or ", ", ")
        return f"must be one of {expected}; got {_shown(value)}" + (
            " as a key" if key_error else ""
        )
    typed = _type_message(kind, value, ctx)
    if typed is not None:
        return typed
    if kind in _BOUND_WORDS:
        bound = next(iter(ctx.values()), "?")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # "greater than 0", not "greater than 0.0"
        return f"must be {_BOUND_WORDS[kind]} {bound}, got {_shown(value)}"
    if kind == "finite_number":
        return "must be a finite number"
    if kind in {"value_error", "assertion_error"}:
        msg = str(ctx.get("error") or err.get("msg", ""))
        for lead in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(lead)
        return msg
    msg = str(err.get("msg", kind))
    return msg[:1].lower() + msg[1:]


_BOUND_WORDS = {
    "greater_than": "greater than",
    "greater_than_equal": "at least",
    "less_than": "less than",
    "less_than_equal": "at most",
}


def _unknown_key(root: type[BaseModel], loc: Path, extra_known: list[str] | None) -> str:
    """An unknown key, with the closest known one (or, with none close, all of them)."""
    parent = model_at(root, loc[:-1])
    known = field_names(parent) if parent is not None else []
    if extra_known and parent is not None and "timeout_seconds" in known:
        known = known + extra_known
    name = str(loc[-1]) if loc else "?"
    close = get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = f" (known: {', '.join(sorted(known))})" if known and not close else ""
    return f"unknown key{hint}{listed}"


def _type_message(kind: str, value: Any, ctx: dict[str, Any]) -> str | None:
    """A value of the wrong type, or text that breaks one of srt's scalar rules."""
    if kind == "string_type" and (value is None or isinstance(value, bool)):
        return f"must be text, got {_shown(value)}; quote it if you mean the word"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]}, got {_shown(value)}"
    if kind == "string_pattern_mismatch":
        rule = SCALAR_RULES.get(str(ctx.get("pattern")))
        if rule is not None:
            return rule.problem(value)
    return None
