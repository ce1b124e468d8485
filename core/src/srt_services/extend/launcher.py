"""The launcher interface: a planned instance to a running, signallable process.

The runtime (``srt_services.supervise``) drives every launcher the same way; it only knows
the local process it started (the service itself, or a client such as ``srun`` that lives
exactly as long as the remote task). Exits reach the runtime as SIGCHLD events of that
local process; a launcher only decides how to start it and how to deliver signals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from srt_services.launch.handle import Handle, OneShotResult
    from srt_services.plan.model import Plan, PlannedInstance


class Launcher:
    """Base class of launchers. Subclass it and set ``name``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""

    def __init__(self, plan: Plan, job_dir: str, options: dict[str, Any] | None = None) -> None:
        self.plan = plan
        self.job_dir = job_dir
        self.options = options or {}

    def prepare(self) -> None:
        """Called once before the first launch (resolve nodes, read cluster settings)."""

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        """Start ``instance`` without waiting; its exit arrives as a SIGCHLD of the handle."""
        raise NotImplementedError

    def terminate(self, handles: list[Handle]) -> None:
        """Ask every handle's process to stop (SIGTERM semantics), all at once."""
        raise NotImplementedError

    def kill(self, handles: list[Handle]) -> None:
        """Stop every handle's process now (SIGKILL semantics)."""
        raise NotImplementedError

    def stop_budget(self, wanted: float) -> float:
        """The grace this launcher can afford (Slurm: below KillWait)."""
        return wanted

    async def run_oneshot(
        self, argv: list[str], node: str, log_path: str, env: dict[str, str], timeout: float,
        cwd: str | None = None,
    ) -> OneShotResult:
        """Run a short command (clone, build) on ``node`` and wait for it, bounded."""
        raise NotImplementedError
