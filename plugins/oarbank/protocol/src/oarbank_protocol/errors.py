"""Exception classes, one per way a protocol call or an admission can go wrong.

Callers decide differently per failure (retry a timeout, withdraw a capability for a missing
executable, never retry an "invalid config" error document), so each cause gets its own class
instead of one exception with a string to parse. Every class carries ``retryable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class ReportedError(Protocol):
    """The error document a failing op printed (:class:`~.documents.ErrorDocument`), as
    much of it as an exception carries: its code, and whether trying again can help."""

    @property
    def code(self) -> int: ...

    def is_retryable(self) -> bool: ...


class OarbankError(Exception):
    """Base of every error this package raises on purpose."""

    retryable: bool = False


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class FieldError:
    """One schema violation, with the dotted path to the field so authors can find it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<document>'}: {self.message}"


class DocumentError(OarbankError):
    """A document is not what its schema says (raised by :func:`documents.parse_document`)."""


class DocumentSyntaxError(DocumentError):
    """The bytes are not exactly one JSON object (garbage, two documents, an array, null)."""

    def __init__(self, message: str, excerpt: str) -> None:
        super().__init__(f"{message}; output starts with: {excerpt}" if excerpt else message)
        self.reason = message
        self.excerpt = excerpt


class DocumentSchemaError(DocumentError):
    """The JSON object has fields of the wrong type or misses required ones."""

    def __init__(self, document: str, errors: Sequence[FieldError]) -> None:
        detail = "; ".join(str(e) for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(f"invalid {document} document: {detail}{more}")
        self.document = document
        self.field_errors = tuple(errors)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.field_errors)


class ManifestError(OarbankError):
    """The module manifest or bundle layout is invalid; nothing is started."""


class SandboxRefused(ManifestError):
    """The module cannot run confined as it asks: a grant the site does not approve, or no
    sandbox on this host while the site does not allow unconfined modules. Nothing starts."""


# --------------------------------------------------------------------------- executor


class ExecError(OarbankError):
    """A protocol operation did not produce a usable document.

    ``reason`` is one sentence that names the op; ``stderr_tail`` is already redacted, so
    ``str(exc)`` is safe to log.
    """

    retryable = True

    def __init__(self, op: str, reason: str, *, stderr_tail: str = "") -> None:
        text = reason
        if stderr_tail:
            text += f"\n--- stderr (last lines) ---\n{stderr_tail.rstrip()}"
        super().__init__(text)
        self.op = op
        self.reason = reason
        self.stderr_tail = stderr_tail


class ExecutableError(ExecError):
    """The executable cannot be run at all; retrying without an operator fixing it is futile."""

    retryable = False

    def __init__(self, op: str, path: str, problem: str) -> None:
        super().__init__(op, f"cannot run `{op}`: {problem}: {path}")
        self.path = path
        self.problem = problem


class ExecutableMissing(ExecutableError):
    """The executable does not exist (ENOENT on the path itself, or not found on PATH)."""


class NotExecutable(ExecutableError):
    """The file exists but lacks execute permission (mode 0644, EACCES)."""


class ExecutableIsDirectory(ExecutableError):
    """The exec path names a directory."""


class BadInterpreter(ExecutableError):
    """The kernel refused the file: a missing shebang interpreter (ENOENT) or ENOEXEC."""


class TextFileBusy(ExecutableError):
    """ETXTBSY persisted through every retry (someone keeps the file open for writing)."""

    retryable = True


class OpTimeout(ExecError):
    """The operation ran past its timeout; its process group was killed."""

    def __init__(self, op: str, timeout_s: float, *, stderr_tail: str = "") -> None:
        super().__init__(
            op,
            f"`{op}` timed out after {timeout_s:g} s (its process group was killed)",
            stderr_tail=stderr_tail,
        )
        self.timeout_s = timeout_s


class OpFailed(ExecError):
    """Non-zero exit. ``error`` holds the module's (redacted) error document if it printed one."""

    def __init__(
        self,
        op: str,
        exit_code: int,
        reason: str,
        *,
        error: ReportedError | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(op, reason, stderr_tail=stderr_tail)
        self.exit_code = exit_code
        self.error = error
        self.retryable = error.is_retryable() if error is not None else True

    @property
    def code(self) -> int | None:
        return self.error.code if self.error is not None else None


class MalformedResponse(ExecError):
    """Output that is not exactly one JSON object; exit status 0 does not rescue it."""

    def __init__(self, op: str, problem: str, *, excerpt: str = "", stderr_tail: str = "") -> None:
        reason = f"`{op}` returned a malformed response: {problem}"
        if excerpt:
            reason += f"; output starts with: {excerpt}"
        super().__init__(op, reason, stderr_tail=stderr_tail)
        self.problem = problem
        self.excerpt = excerpt


class OutputTooLarge(MalformedResponse):
    """More than the stdout cap; the child was killed rather than left blocked on a full pipe."""

    def __init__(self, op: str, cap: int, *, excerpt: str = "", stderr_tail: str = "") -> None:
        super().__init__(
            op,
            f"output too large (more than {cap} bytes on stdout)",
            excerpt=excerpt,
            stderr_tail=stderr_tail,
        )
        self.cap = cap


class InvalidDocument(MalformedResponse):
    """A JSON object with wrong field types; ``fields`` names them (CNI code 2 style)."""

    retryable = False

    def __init__(self, op: str, error: DocumentSchemaError, *, stderr_tail: str = "") -> None:
        super().__init__(op, str(error), stderr_tail=stderr_tail)
        self.field_errors = error.field_errors

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.field_errors)


# --------------------------------------------------------------------------- lifecycle


class LifecycleError(OarbankError):
    """Base of errors raised by the lifecycle manager."""


class AdmissionRefused(LifecycleError):
    """An admission was refused before anything was launched."""


class UnknownCapability(AdmissionRefused):
    """The request names a capability, service or pool the module does not declare."""


class CapabilityUnavailable(AdmissionRefused):
    """The capability exists but is withdrawn (unhealthy, failed, undetected, unsupported)."""

    def __init__(self, capability: str, reason: str) -> None:
        super().__init__(f"capability {capability!r} is unavailable: {reason}")
        self.capability = capability
        self.reason = reason


class ResourcesExhausted(AdmissionRefused):
    """Pool tokens or host memory do not fit (CSI RESOURCE_EXHAUSTED)."""

    retryable = True


class PoolExhausted(ResourcesExhausted):
    def __init__(self, pool: str, requested: int, capacity: int, reserved: int) -> None:
        free = max(capacity - reserved, 0)
        super().__init__(
            f"pool {pool!r} exhausted: requested {requested} token(s), "
            f"{free} free of {capacity} ({reserved} reserved)"
        )
        self.pool = pool
        self.requested = requested
        self.capacity = capacity
        self.reserved = reserved
        self.free = free


class MemoryExhausted(ResourcesExhausted):
    def __init__(
        self,
        needed_gb: float,
        free_gb: float,
        budget_gb: float,
        detail: str,
        *,
        host: str | None = None,
    ) -> None:
        if host is None:
            message = (
                f"host memory budget exceeded: need {needed_gb:g} GB ({detail}), "
                f"{free_gb:g} GB free of {budget_gb:g} GB"
            )
        else:
            message = f"host memory short: need {needed_gb:g} GB ({detail}), {host}"
        super().__init__(message)
        self.needed_gb = needed_gb
        self.free_gb = free_gb
        self.budget_gb = budget_gb


class ServiceStartFailed(LifecycleError):
    """The service needed by an admission failed to start or become ready."""

    def __init__(self, service: str, reason: str, *, retryable: bool = True) -> None:
        super().__init__(f"service {service!r} did not become ready: {reason}")
        self.service = service
        self.reason = reason
        self.retryable = retryable


class AdmissionTimeout(LifecycleError):
    """The admission's own deadline passed while its services were still starting."""

    retryable = True


class StateLocked(LifecycleError):
    """Another live agent holds the state file; starting a second one would duplicate work."""
