"""Typed documents of service protocol 1, and the strict parser for executables' output.

Two policies meet here:

* Documents *received from executables* are forward compatible: unknown fields are kept out
  of the way (and reported, so an author sees a typo) but never fatal, while a known field of
  the wrong type is an error that names the field. Types are checked strictly (``"5"`` is
  not an integer, ``1`` is not a boolean) because a lax coercion would hide module bugs.
* The manifest (:mod:`oarbank_protocol.manifest`, re-exported here) is written by module authors
  and checked before anything runs, so it rejects unknown keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeInt,
    ValidationError,
)

from oarbank_protocol.errors import DocumentSchemaError, DocumentSyntaxError, FieldError
from oarbank_protocol.manifest import (
    Lifecycle,
    ModuleManifest,
    ProbeSpec,
    RestartSpec,
    ServiceSpec,
)

PROTOCOL_VERSION: Final = 1

LABEL_ATTEMPT: Final = "oarbank.attempt_id"
LABEL_NODE: Final = "oarbank.node"
LABEL_SERVICE: Final = "oarbank.service"
REQUIRED_LABELS: Final = (LABEL_ATTEMPT, LABEL_NODE, LABEL_SERVICE)

EXCERPT_CHARS: Final = 200


class Document(BaseModel):
    """Base of every document an executable prints: unknown fields allowed, then reported."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


class Health(StrEnum):
    """Nomad's three driver health states; ``undetected`` means "cannot run here at all"."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    UNDETECTED = "undetected"


HealthValue = Literal["healthy", "unhealthy", "undetected"]


class Reserve(Document):
    """Host resources the service holds while it runs, charged against the node budget."""

    mem_gb: float = Field(0.0, ge=0, description="Host memory held while running, in GB.")


AttrValue = str | int | float | bool


def _check_attrs(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if not isinstance(item, str | int | float | bool) or item is None:
            raise ValueError(
                f"attrs.{key} must be a string, number or boolean, not {type(item).__name__}"
            )
    return value


class Fingerprint(Document):
    """Answer to ``fingerprint``: cheap, read-only, safe to call every period."""

    health: HealthValue = Field(description="healthy | unhealthy | undetected.")
    detail: str = Field("", description="Why the service is not healthy; shown to operators.")
    attrs: Annotated[dict[str, Any], AfterValidator(_check_attrs)] = Field(
        default_factory=dict,
        description="Free-form facts (versions, paths) for operators.",
        json_schema_extra={"additionalProperties": {"type": ["string", "number", "boolean"]}},
    )
    pools: dict[str, NonNegativeInt] = Field(
        default_factory=dict,
        description="Tokens of each declared pool the service can provide now (>= 0).",
    )
    reserve: Reserve = Field(default_factory=Reserve)
    running: bool = Field(
        False,
        description="Whether the service runs now; drives adoption. Services must send it; "
        "probes may omit it.",
    )
    pid: int | None = Field(
        None, gt=0, description="Main process of the running service, if it has one."
    )


class OpResult(Document):
    """Answer to ``start``, ``stop`` and ``destroy``. Exit status 0 already means success."""

    changed: bool | None = Field(
        None, description="False when the call was an idempotent no-op (already in that state)."
    )
    escalated: bool = Field(False, description="stop only: the forceful path was needed.")
    msg: str = Field("", description="Human-readable note.")
    pid: int | None = Field(None, gt=0, description="start only: main process of the service.")
    created: list[str] = Field(
        default_factory=list, description="start only: ids of owned objects it created."
    )


class Status(Document):
    """Answer to ``status`` and ``ready``."""

    running: bool
    ready: bool
    detail: str = ""


class OwnedObject(Document):
    """An object outside the workdir that the service created for an oarbank attempt."""

    id: str = Field(min_length=1, description="Argument for destroy.")
    kind: str = Field(description="container | vm | volume | ... (free-form).")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Must hold oarbank.attempt_id, oarbank.node and oarbank.service; objects "
        "without them are never touched.",
    )
    busy: bool | None = Field(None, description="True when destroy without --force would refuse.")
    uid: int | None = Field(
        None, ge=0, description="Owner uid, when the object has one; a foreign uid is never reaped."
    )

    @property
    def attempt_id(self) -> str | None:
        return self.labels.get(LABEL_ATTEMPT)

    @property
    def node(self) -> str | None:
        return self.labels.get(LABEL_NODE)

    @property
    def service(self) -> str | None:
        return self.labels.get(LABEL_SERVICE)

    def missing_labels(self) -> list[str]:
        return [key for key in REQUIRED_LABELS if not self.labels.get(key)]


class OwnedList(Document):
    """Answer to ``list_owned``."""

    objects: list[OwnedObject]


class ErrorCode(IntEnum):
    """Error codes 0-99 are ours (CNI numbering where CNI has one); 100+ belong to modules."""

    INCOMPATIBLE_VERSION = 1
    UNSUPPORTED_FIELD = 2
    UNKNOWN_OBJECT = 3
    INVALID_ENVIRONMENT = 4
    IO_FAILURE = 5
    DECODE_FAILURE = 6
    INVALID_CONFIG = 7
    TRY_AGAIN_LATER = 11
    BUSY = 12
    RESOURCE_EXHAUSTED = 50
    UNSUPPORTED_PLATFORM = 51


RETRYABLE_CODES: Final = frozenset(
    {ErrorCode.IO_FAILURE, ErrorCode.TRY_AGAIN_LATER, ErrorCode.BUSY, ErrorCode.RESOURCE_EXHAUSTED}
)
NON_RETRYABLE_CODES: Final = frozenset(set(ErrorCode) - RETRYABLE_CODES)


class ErrorDocument(Document):
    """What a failing op prints on stdout with a non-zero exit: ``{code, msg, details}``."""

    code: int = Field(ge=0)
    msg: str
    details: str | dict[str, JsonValue] | None = None
    retryable: bool | None = Field(
        None, description="Overrides the code table: whether trying again later can succeed."
    )

    def is_retryable(self) -> bool:
        """Decide per the code table unless the module said so explicitly.

        Unknown and module-specific codes count as retryable: a wrong guess costs a few
        restarts bounded by ``max_failures``, while the opposite would withdraw a capability
        for good on the first transient hiccup.
        """
        if self.retryable is not None:
            return self.retryable
        return self.code not in NON_RETRYABLE_CODES


# --------------------------------------------------------------------------- parsing


def excerpt(raw: bytes | str, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable start of some output for error messages (never the whole thing)."""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    total = len(raw)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({total} bytes)"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """Exactly one JSON object in UTF-8, surrounding whitespace allowed, nothing else.

    Duplicate keys and NaN/Infinity are refused because parsers disagree about them, and a
    document that two readers interpret differently is not a protocol document.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentSyntaxError(
            f"output is not valid UTF-8 ({exc.reason})", excerpt(raw)
        ) from None
    if text.startswith("\ufeff"):
        raise DocumentSyntaxError("output starts with a byte order mark", excerpt(raw))
    if not text.strip():
        raise DocumentSyntaxError("empty output, expected one JSON object", "")
    try:
        value = json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            reason = f"more than one JSON document or trailing text at offset {exc.pos}"
        else:
            reason = f"not JSON ({exc.msg} at offset {exc.pos})"
        raise DocumentSyntaxError(reason, excerpt(raw)) from None
    except (ValueError, RecursionError) as exc:
        raise DocumentSyntaxError(f"not acceptable JSON ({exc})", excerpt(raw)) from None
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        kind = {"list": "an array", "str": "a string", "dict": "an object"}.get(kind, kind)
        raise DocumentSyntaxError(f"expected a JSON object, got {kind}", excerpt(raw))
    return value


D = TypeVar("D", bound=Document)


@dataclass(frozen=True)
class Parsed(Generic[D]):
    """A validated document plus the unknown fields it carried (dotted paths)."""

    document: D
    unknown_fields: tuple[str, ...]
    raw: dict[str, Any]


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def field_errors(exc: ValidationError) -> list[FieldError]:
    return [FieldError(_loc_to_path(tuple(e["loc"])), e["msg"]) for e in exc.errors()]


def _unknown(model: BaseModel, prefix: str) -> Iterator[str]:
    for key in model.model_extra or {}:
        yield f"{prefix}{key}"
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _unknown(value, f"{prefix}{name}.")
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, BaseModel):
                    yield from _unknown(item, f"{prefix}{name}[].")


def unknown_fields(model: BaseModel, limit: int = 50) -> tuple[str, ...]:
    """Distinct unknown-field paths, list indexes folded (``objects[].x``), at most ``limit``."""
    seen: dict[str, None] = {}
    for path in _unknown(model, ""):
        if path not in seen:
            seen[path] = None
            if len(seen) >= limit:
                break
    return tuple(seen)


def validate_document(model: type[D], value: dict[str, Any]) -> Parsed[D]:
    try:
        document = model.model_validate(value, strict=True)
    except ValidationError as exc:
        raise DocumentSchemaError(model.__name__, field_errors(exc)) from None
    return Parsed(document, unknown_fields(document), value)


def parse_document(model: type[D], raw: bytes) -> Parsed[D]:
    """Parse an executable's stdout as one ``model`` document (see module docstring)."""
    return validate_document(model, parse_json_object(raw))


__all__ = [
    "LABEL_ATTEMPT",
    "LABEL_NODE",
    "LABEL_SERVICE",
    "PROTOCOL_VERSION",
    "REQUIRED_LABELS",
    "AttrValue",
    "Document",
    "ErrorCode",
    "ErrorDocument",
    "Fingerprint",
    "Health",
    "HealthValue",
    "Lifecycle",
    "ModuleManifest",
    "OpResult",
    "OwnedList",
    "OwnedObject",
    "Parsed",
    "ProbeSpec",
    "Reserve",
    "RestartSpec",
    "ServiceSpec",
    "Status",
    "excerpt",
    "parse_document",
    "parse_json_object",
    "unknown_fields",
    "validate_document",
]
