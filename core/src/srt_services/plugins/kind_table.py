"""Rows describing every kind, for ``srt kinds`` and the docs."""

from __future__ import annotations

import types
import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srt_services.contracts.kind import ServiceKind
    from srt_services.plugins.manager import PluginSet


def kind_rows(plugins: PluginSet) -> list[dict[str, Any]]:
    return [kind_row(plugins, name, kind) for name, kind in plugins.kinds().items()]


def kind_row(plugins: PluginSet, name: str, kind: ServiceKind) -> dict[str, Any]:
    return {
        "type": name,
        "summary": kind.summary,
        "start": kind.default_start,
        "critical": kind.default_critical,
        "placement": kind.default_placement
        + (
            f" (only {', '.join(sorted(kind.allowed_placements))})"
            if kind.allowed_placements
            else ""
        ),
        "per": kind.default_per,
        "readiness_timeout": kind.default_readiness_timeout,
        "readiness_timeout_summary": kind.readiness_timeout_summary,
        "readiness": getattr(kind, "readiness_summary", ""),
        "external": kind.supports_external,
        "dedicated": kind.supports_dedicated,
        "stop_grace": kind.default_stop_grace,
        "options": sorted(kind.Options.model_fields),
        "plugin": plugins.owner("kind", name) or "?",
    }


def kind_detail(plugins: PluginSet, name: str) -> dict[str, Any]:
    """Everything ``srt kinds NAME`` shows: the row plus each option with its type, default
    and description, and the kind's other settings."""
    kind = plugins.kind(name)
    row = kind_row(plugins, name, kind)
    options = []
    for field_name, info in kind.Options.model_fields.items():
        required = info.is_required()
        options.append(
            {
                "name": field_name,
                "type": type_text(info.annotation),
                "required": required,
                "default": None
                if required
                else _jsonable(info.get_default(call_default_factory=True)),
                "description": info.description or "",
            }
        )
    row.update(
        allowed_placements=sorted(kind.allowed_placements) if kind.allowed_placements else None,
        external_schemes=list(kind.external_schemes),
        command=(
            "required"
            if kind.requires_command
            else "not allowed"
            if kind.forbids_command
            else "optional"
        ),
        stop_signal=kind.stop_signal,
        readiness_interval=kind.default_readiness_interval,
        option_fields=options,
    )
    return row


def type_text(annotation: Any) -> str:
    """A field's type as a reader writes it (``int | None``, ``list[str]``, ``'a' | 'b'``)."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is not None:
        inner = ", ".join(type_text(a) for a in args)
        base = getattr(origin, "__name__", str(origin))
        return f"{base}[{inner}]" if inner else base
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
