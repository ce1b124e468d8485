"""The launcher interface: a planned instance to a running, signallable process.

The runtime (``srt_services.supervise``) drives every launcher the same way. It only knows
the *local* process a launch created (the service itself, or a client such as ``srun`` that
lives exactly as long as the remote task): that process's exit, seen through SIGCHLD, is the
instance's exit. A launcher decides how to start it, how to deliver stop signals, and what
it can say about the remote side.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from srt_services.contracts.allocation import Allocation, AllocationRequest
    from srt_services.contracts.handle import CommandResult, Handle
    from srt_services.contracts.plan import Plan, PlannedInstance


class ChildWatch(Protocol):
    """The runtime's reaper of this process's children, as a launcher uses it: register a
    child it spawned so its exit is heard, and know which children are watched."""

    def watch(
        self,
        pid: int,
        callback: Callable[[int], None],
        popen: subprocess.Popen[bytes] | None = None,
    ) -> None: ...

    def watched_pids(self) -> set[int]: ...


class LaunchNotices(Protocol):
    """What a launcher that hears from its nodes (agents) tells the runtime between the
    calls the runtime makes: an attempt's remote PID became known, a log it follows was
    written on a node, or a callback the launcher called on the runtime's behalf raised."""

    def state_changed(self) -> None: ...

    def file_changed(self, path: str) -> None: ...

    def callback_failed(self, what: str, error: BaseException) -> None: ...


class LaunchFailed(Exception):
    """The launcher cannot run the job at all (a node whose agent never started): the job
    fails before its first launch, with ``node`` named when one node is to blame."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """What a launcher is told besides the plan, settled once by the application layer.

    ``cookie`` marks every process of this run (``SRT_JOB_COOKIE``) so a launcher can find
    what escaped its process group. The rest comes from the site config, read once at the
    top: container image aliases, mounts every container gets, extra ``srun`` options, the
    network interface whose address a Slurm node advertises, and the node agents' bounds.
    """

    cookie: str = ""
    container_aliases: Mapping[str, str] = field(default_factory=dict)
    container_mounts: Sequence[str] = ()
    srun_extra: Sequence[str] = ()
    network_interface: str | None = None
    #: Slurm node agents: how long every node's agent may take to start, and how long one
    #: may stay silent before its node counts as lost (and the orchestrator, for it)
    agent_start_timeout: float = 60.0
    agent_lost_after: float = 10.0


@dataclass(slots=True)
class Preflight:
    problems: list[str] = field(default_factory=list)
    reaped: list[str] = field(default_factory=list)


#: The instance settings that only some launchers can apply (all of them are srun's).
LAUNCH_SETTINGS: tuple[str, ...] = (
    "container",
    "cpus_per_task",
    "cpu_bind",
    "srun_options",
    "mounts",
)


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
    #: Whether it starts one launch across several nodes (``PlannedInstance.nodes``: an
    #: MPI worker wider than a node). A plan with one is refused for a launcher that
    #: cannot: the worker could not run as the engine built it.
    spans_nodes: ClassVar[bool] = False

    def __init__(self, plan: Plan, job_dir: str, settings: LaunchSettings | None = None) -> None:
        self.plan = plan
        self.job_dir = job_dir
        self.settings = settings or LaunchSettings()
        self.watcher: ChildWatch | None = None
        self.notices: LaunchNotices | None = None

    def attach(self, watcher: ChildWatch, notices: LaunchNotices | None = None) -> None:
        """Hand over the runtime's child reaper once its event loop runs (the launcher is
        built before the loop by the application layer), before the first launch; and
        where the runtime listens for what the launcher hears from its nodes."""
        self.watcher = watcher
        self.notices = notices

    @property
    def children(self) -> ChildWatch:
        """The attached reaper; launching before :meth:`attach` is a programming error."""
        if self.watcher is None:
            raise RuntimeError(f"{type(self).__name__} used before attach()")
        return self.watcher

    @classmethod
    def allocation(
        cls, request: AllocationRequest, needed: int, settings: LaunchSettings | None = None
    ) -> Allocation:
        """The nodes to plan against (local: virtual nodes; Slurm: the allocation's).

        Asked by the application layer before planning, with the node count the recipe
        needs, so the planner receives a finished allocation and never calls back here."""
        return request.build(needed)

    async def prepare(self) -> None:
        """Called once before the first launch."""

    async def finish(self) -> None:
        """Called once after every process of the job stopped: remove what the job made on
        the nodes outside the job directory (the node-local ``{local_dir}`` tree)."""

    def unkillable(self) -> list[str]:
        """After :meth:`finish`: processes of the job on nodes only the launcher reaches
        that outlived its last sweep there, one sentence each (empty: none)."""
        return []

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        """Start ``instance`` without waiting; :meth:`watch_exit` is called right after."""
        raise NotImplementedError

    def watch_exit(self, handle: Handle, callback: Callable[[int], None]) -> None:
        """Have ``callback(code)`` called once, when the attempt ``handle`` ends.

        By default that is the exit of the local process ``handle.pid`` (the service, or
        the client of its remote task), heard through the watcher. A launcher whose
        attempts have no local process (a node agent runs them) calls it itself when the
        node reports the exit, or when it loses the node (setting ``handle.exit_reason``)."""
        self.children.watch(handle.pid, callback, handle.popen)

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
