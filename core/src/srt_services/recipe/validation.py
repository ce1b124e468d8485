"""Recipe data into models at a cost bounded by the data, whether it is valid or not.

pydantic collects one error per wrong value, each about 450 bytes in pydantic-core before
it is ever turned into Python: a 6 MB recipe of a million wrong-typed list items took
1.4 GB to refuse, where a valid recipe of that size takes under 100 MB. Only the first
:data:`~srt_services.recipe.problems.MAX_SHOWN` problems are shown anyway, so:

* :func:`validate` uses a copy of the model's validator in which every list and mapping
  stops at its first bad item (pydantic-core's ``fail_fast``). A valid recipe gets the
  same model at the same speed; an invalid one fails after a bounded number of errors.
* :func:`bounded_errors` then validates again, for the report, with every list item and
  mapping entry wrapped: once enough errors are on their way out, a failing item is
  counted and replaced instead of adding its errors. Its container then fails with one
  marker error (so no validator after it sees the stand-in), which
  :mod:`~srt_services.recipe.pydantic_errors` leaves out. The errors kept are the first
  ones in validation order; the count of the others is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError, SchemaError, SchemaValidator

from srt_services.recipe.problems import MAX_SHOWN

M = TypeVar("M", bound=BaseModel)

#: The error type of the marker a container raises for items it counted and left out.
ELIDED = "srt_elided"
#: Schemas of containers whose items are validated one by one.
_CONTAINERS = {
    "list": ("items_schema",),
    "set": ("items_schema",),
    "dict": ("keys_schema", "values_schema"),
}
#: An item replaced after it was counted (never seen: its container fails).
_LEFT_OUT = None


@dataclass(slots=True)
class _Budget:
    """How many errors are on their way out, and how many were counted and dropped."""

    cap: int
    admitted: int = 0
    dropped: int = 0
    markers: int = 0
    left_out: int = 0


_BUDGET: ContextVar[_Budget | None] = ContextVar("srt_validation_budget", default=None)

_FAST: dict[type[BaseModel], SchemaValidator] = {}
_BOUNDED: dict[type[BaseModel], SchemaValidator] = {}


def validate(model: type[M], data: Any) -> M:
    """``model.model_validate(data)``, where a list or mapping stops at its first bad item.

    Raises :class:`ValidationError` with a number of errors bounded by the model's shape
    (one per field, one per container), not by the data: call :func:`bounded_errors` for
    the report.
    """
    validator = _FAST.get(model)
    if validator is None:
        validator = _FAST[model] = _validator(model, _fail_fast)
    result: M = validator.validate_python(data)
    return result


def bounded_errors(
    model: type[BaseModel], data: Any, cap: int = MAX_SHOWN
) -> tuple[ValidationError | None, int]:
    """The validation errors of ``data``: about ``cap`` of them, and how many more there were.

    ``None`` when the data is valid after all. The errors returned may include
    :data:`ELIDED` markers, which are not problems and not counted.
    """
    validator = _BOUNDED.get(model)
    if validator is None:
        validator = _BOUNDED[model] = _validator(model, _counted)
    budget = _Budget(cap)
    token = _BUDGET.set(budget)
    try:
        validator.validate_python(data)
    except ValidationError as exc:
        return exc, budget.dropped
    finally:
        _BUDGET.reset(token)
    return None, budget.dropped


def _validator(
    model: type[BaseModel], change: Callable[[dict[str, Any]], dict[str, Any]]
) -> SchemaValidator:
    """The model's validator with ``change`` applied to its containers; the model's own
    validator where this pydantic-core cannot build one (the bound is lost, not the check:
    ``_use_prebuilt`` and ``fail_fast`` are recent and the former is private)."""
    schema = _rewrite(model.__pydantic_core_schema__, change)
    try:
        # not the models' own prebuilt validators: those would skip the changed containers
        return SchemaValidator(schema, schema.get("config"), _use_prebuilt=False)
    except (TypeError, SchemaError):  # pragma: no cover - an older or newer pydantic-core
        return model.__pydantic_validator__  # type: ignore[return-value]


def _rewrite(node: Any, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A copy of a core schema with ``change`` applied to every container schema in it."""
    if isinstance(node, list):
        return [_rewrite(item, change) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rewrite(value, change) for key, value in node.items() if key != "serialization"}
    kind = out.get("type")
    if isinstance(kind, str) and kind in _CONTAINERS:
        return change(out)
    return out


def _fail_fast(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "fail_fast": True}


def _counted(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    for key in _CONTAINERS[schema["type"]]:
        if key in inner:
            inner[key] = _wrap(inner[key], _item)
    return _wrap(inner, _container)


def _wrap(schema: dict[str, Any], function: Callable[..., Any]) -> dict[str, Any]:
    return {
        "type": "function-wrap",
        "function": {"type": "no-info", "function": function},
        "schema": schema,
    }


def _item(value: Any, handler: Callable[[Any], Any]) -> Any:
    budget = _BUDGET.get()
    if (
        budget is None
    ):  # pragma: no cover - the bounded validator is only used inside bounded_errors
        return handler(value)
    admitted, markers = budget.admitted, budget.markers
    try:
        return handler(value)
    except ValidationError as exc:
        found = exc.error_count() - (budget.markers - markers)
        if admitted < budget.cap:  # room left: these errors are shown
            budget.admitted = admitted + found
            raise
        # counted and left out, with whatever the item's own items had let through
        budget.admitted, budget.markers = admitted, markers
        budget.dropped += found
        budget.left_out += 1
        return _LEFT_OUT


def _container(value: Any, handler: Callable[[Any], Any]) -> Any:
    budget = _BUDGET.get()
    if budget is None:  # pragma: no cover - as above
        return handler(value)
    left_out = budget.left_out
    result = handler(value)
    if budget.left_out != left_out:  # it holds stand-ins: it must not pass
        budget.markers += 1
        raise PydanticCustomError(ELIDED, "more problems, counted")
    return result
