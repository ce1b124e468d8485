"""The launcher interface: a planned instance to a running, signallable process.

The runtime (``srt_services.supervise``) drives every launcher the same way. It only knows
the *local* process a launch created (the service itself, or a client such as ``srun`` that
lives exactly as long as the remote task): that process's exit, seen through SIGCHLD, is the
instance's exit. A launcher decides how to start it, how to deliver stop signals, and what
it can say about the remote side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from srt_services.launch.children import ChildWatcher, CommandResult
    from srt_services.launch.handle import Handle
    from srt_services.plan.allocation import Allocation, AllocationRequest
    from srt_services.plan.model import Plan, PlannedInstance


@dataclass(slots=True)
class Preflight:
    problems: list[str] = field(default_factory=list)
    reaped: list[str] = field(default_factory=list)


#: The instance settings that only some launchers can apply (all of them are srun's).
LAUNCH_SETTINGS: tuple[str, ...] = ("container", "cpus_per_task", "cpu_bind", "srun_options")


class Launcher:
    """Base class of launchers. Subclass it and set ``name``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: Whether the launched processes are on this machine (and can be inspected by PID).
    local_processes: ClassVar[bool] = True
    #: Which of :data:`LAUNCH_SETTINGS` this launcher applies. A recipe written for a
    #: cluster may set the others; the run says so before it starts, instead of starting
    #: the process without its image or its CPU binding and saying nothing.
    applies: ClassVar[frozenset[str]] = frozenset(LAUNCH_SETTINGS)

    @classmethod
    def unapplied(cls, plan: Plan) -> list[str]:
        """One warning per unit that sets a launch setting this launcher does not apply."""
        out = []
        for unit in plan.units:
            found = [
                key
                for key in LAUNCH_SETTINGS
                if key not in cls.applies and any(getattr(i, key) for i in unit.instances)
            ]
            if found:
                out.append(
                    f"{unit.label}: the {cls.name} launcher does not apply {', '.join(found)};"
                    " it runs the process without them"
                )
        return out

    def __init__(
        self, plan: Plan, job_dir: str, watcher: ChildWatcher, options: dict[str, Any] | None = None
    ) -> None:
        self.plan = plan
        self.job_dir = job_dir
        self.watcher = watcher
        self.options = options or {}

    @classmethod
    def allocation(cls, request: AllocationRequest, needed: int) -> Allocation:
        """The nodes to plan against (local: virtual nodes; Slurm: the allocation's)."""
        return request.build(needed)

    async def prepare(self) -> None:
        """Called once before the first launch."""

    async def finish(self) -> None:
        """Called once after every process of the job stopped: remove what the job made on
        the nodes outside the job directory (the node-local ``{local_dir}`` tree)."""

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        """Start ``instance`` without waiting. Register its exit with the watcher."""
        raise NotImplementedError

    async def terminate(self, handles: list[Handle]) -> None:
        """Ask every handle's process to stop (SIGTERM semantics), all at once."""
        raise NotImplementedError

    async def kill(self, handles: list[Handle]) -> None:
        """Stop every handle's process now (SIGKILL semantics), all at once."""
        raise NotImplementedError

    async def sees_job_dir(self, node: str) -> bool:
        """Whether ``node`` sees the job directory this process writes (a shared
        filesystem): then one source checkout and one build serve every node."""
        return True

    def stop_budget(self, wanted: float) -> float:
        """The grace this launcher can afford (Slurm: inside KillWait)."""
        return wanted

    def owns_listener(self, handle: Handle, port: int) -> bool | None:
        """Whether ``port`` is held by the instance's processes; ``None`` when unknowable."""
        return None

    async def preflight(self, instances: list[PlannedInstance]) -> Preflight:
        """Check what would make these instances fail at once (a port already taken).

        Leftovers of an earlier srt job that is provably over may be reaped (and reported in
        ``reaped``); anything else holding a port is a problem, named with its PID and owner.
        """
        return Preflight()

    def stray_processes(self, cookie: str, final: bool = False) -> dict[int, str | None]:
        """Processes of this job that escaped their process group: pid -> step (if known).

        ``final``: the teardown's last look, once everything it knew of is gone; a launcher
        whose usual look is quick but can miss something (a scan of its own process tree)
        looks everywhere then. A launcher whose usual look is already complete ignores it.
        """
        return {}

    def teardown_started(self) -> None:
        """The job is stopping: nothing will be launched any more. A launcher may start
        releasing what it holds for launches (the local launcher moves the orchestrator out
        of the job's cgroup meanwhile); :meth:`close` still comes last."""

    def sweep(self, steps: list[str] | None = None) -> None:
        """SIGKILL whatever is left of these steps (``None``: of the whole job) through the
        kernel's bookkeeping (a cgroup), where the launcher has one; else nothing."""

    def cgroup_path(self) -> str | None:
        """The job's cgroup, if the launcher made one (recorded for ``srt stop``)."""
        return None

    def sessions(self) -> dict[int, str]:
        """Session ids this launcher created on this machine -> their step (for ``srt stop``)."""
        return {}

    def close(self) -> None:
        """Called once after the teardown: release what :meth:`prepare` took."""

    async def run_oneshot(
        self,
        argv: list[str],
        node: str,
        log_path: str,
        env: dict[str, str],
        timeout: float,
        cwd: str | None = None,
        container: str | None = None,
    ) -> CommandResult:
        """Run a short command (git clone, a build) on ``node`` and wait for it, bounded.

        ``container`` asks for the command to run in that image (ignored where launchers have
        no containers)."""
        raise NotImplementedError
