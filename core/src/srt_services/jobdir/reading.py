"""Reading a job file back into its typed model, or a clear error.

A job directory outlives the process that wrote it and may be edited, truncated, or
written by another version: whatever a reader finds (not JSON, a string where a PID
belongs, a PID of 400 digits, a missing key), it raises :class:`JobFileError` naming the
file and the field, never a traceback, and never hands a caller a value it would act on
wrongly (a PID outside the kernel's range is refused here, before anything signals it).

Files are opened through :mod:`srt_services.safefile`: a FIFO, a device or a link out of
the job directory in place of a job file is refused (named, with what it is), never waited
on or followed, and a file larger than :data:`MAX_FILE` is not read.

Validation is pydantic's (strict: no "3" for 3), run on the plain dataclasses of the
models; the models themselves stay dataclasses so the orchestrator writes them at orjson's
speed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from srt_services.jobdir.layout import JobDirError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

T = TypeVar("T")

#: The largest job file read (``plan.json`` of 10,000 instances is about 20 MB).
MAX_FILE = 256 << 20

#: Errors quoted in a message; a file of the wrong shape usually has one cause.
SHOWN_ERRORS = 3


class JobFileError(JobDirError):
    """A job file exists but is not what its name promises."""


#: One adapter per model, built on first use (building one costs milliseconds).
_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(model: type[Any]) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return adapter


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's errors as ``field.path: what is wrong (got value)``, the first few."""
    parts = []
    for err in errors[:SHOWN_ERRORS]:
        text = f"{_where(tuple(err.get('loc', ())))}: {err.get('msg', 'invalid')}"
        if err.get("type") != "missing" and "input" in err:
            text += f" (got {_shown(err['input'])})"
        parts.append(text)
    if len(errors) > SHOWN_ERRORS:
        parts.append(f"and {len(errors) - SHOWN_ERRORS} more")
    return "; ".join(parts)


def parse(model: type[T], data: bytes, path: str, what: str) -> T:
    """``data`` (the bytes of ``path``) as a ``model``; :class:`JobFileError` if it is not.

    ``what`` names the content in the message ("a job state").
    """
    from pydantic import ValidationError

    try:
        value: T = _adapter(model).validate_json(data, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors and errors[0].get("type") == "json_invalid":
            raise JobFileError(f"{path} is not valid JSON: {errors[0].get('msg')}") from None
        raise JobFileError(f"{path} is not {what}: {describe_errors(errors)}") from None
    except ValueError as exc:  # e.g. nesting deeper than the parser's recursion limit
        raise JobFileError(f"{path} cannot be read: {exc}") from None
    return value


def read(model: type[T], path: str, what: str, limit: int = MAX_FILE) -> T | None:
    """The file at ``path`` (directly in its job directory) as a ``model``; ``None`` when
    there is no such file."""
    from srt_services.safefile import UnsafeFile, read_job_file

    try:
        data = read_job_file(path, limit)
    except FileNotFoundError:
        return None
    except UnsafeFile as exc:
        raise JobFileError(str(exc)) from None
    return parse(model, data, path, what)
