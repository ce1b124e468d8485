"""The probe interface: one key of a ``readiness:`` or ``liveness:`` block.

A probe has three faces. At load time its ``Config`` model checks what the recipe wrote.
At plan time :meth:`Probe.plan` renders it for one instance into plain JSON (the address to
dial, the file to watch), so dry-run can show it and the runtime needs nothing else. At run
time :meth:`Probe.check` makes one attempt and :meth:`Probe.wait_ready` waits for success;
the default ``wait_ready`` retries ``check`` on the runtime's shared backoff schedule, and
event-driven probes (log, file) override it to wait on inotify instead of polling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from srt_services.contracts.context import InstanceContext


@dataclass(slots=True)
class ProbeResult:
    ok: bool
    detail: str = ""


class ProbeTarget(Protocol):
    """What the runtime gives a probe about the instance it checks."""

    #: Rendered config from :meth:`Probe.plan`.
    config: dict[str, Any]
    #: Absolute path of the instance's log file and the offset this attempt started at.
    log_path: str
    log_offset: int
    job_dir: str
    #: Wall-clock time this attempt was launched (file probes ignore older files).
    started_wall: float
    #: Last failure reason, kept for the timeout message (``ECONNREFUSED``...).
    last_error: str

    def start_of(self, path: str) -> tuple[int | None, int]:
        """Where this attempt began in the file at ``path``: ``(inode, size)`` recorded
        when the attempt was launched, so a probe that follows a file reads only what the
        attempt wrote (``(None, 0)``: the file did not exist then).
        """
        ...

    def owns_listener(self, port: int) -> bool | None:
        """Whether the listener on ``port`` belongs to the instance's process tree.

        ``None`` when it cannot be known (a remote node): the probe then trusts the connect.
        """
        ...

    async def next_attempt(self) -> None:
        """Sleep until the next attempt on the shared backoff schedule."""
        ...

    async def wait_port(self, host: str, port: int, attempt_timeout: float = 1.0) -> None:
        """Return once ``host:port`` accepts a connection (shared poller; no task per try)."""
        ...

    async def wait_file_event(self, path: str, timeout: float) -> None:
        """Return when ``path`` (or its directory) changes, or after ``timeout`` seconds."""
        ...


class Probe:
    """Base class of every probe. Subclass it, set ``name`` and ``Config``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: Model of the probe's settings. A validated config is read-only: entries that write
    #: the same settings share one instance (``plan`` returns a fresh dict per instance).
    Config: ClassVar[type[BaseModel]]
    #: Safe for several instances sharing a node's network namespace (per-worker services).
    instance_scoped: ClassVar[bool] = False
    #: A tcp/http-like probe whose config needs a port.
    uses_port: ClassVar[bool] = False

    def port(self, config: Any) -> int | None:
        """The port the probe dials (for the port ledger), if any."""
        return None

    def problems(self, config: Any, default_port: int | None) -> list[tuple[tuple[str, ...], str]]:
        """Extra checks of a written config: (relative path, message) pairs."""
        if self.uses_port and getattr(config, "port", None) is None and default_port is None:
            return [(("port",), "is required")]
        return []

    def describe(self, planned: dict[str, Any]) -> str:
        """Short text for logs and dry-run (``tcp 127.0.0.1:2379``)."""
        return self.name

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        """Config rendered for one instance: plain JSON types only."""
        return dict(config.model_dump(mode="json"))

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        """One attempt. Must not block the event loop and must honour ``attempt_timeout``."""
        raise NotImplementedError

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        """Return once the probe passes; the caller cancels it on timeout or exit."""
        while True:
            result = await self.check(target, attempt_timeout)
            if result.ok:
                return
            target.last_error = result.detail
            await target.next_attempt()
