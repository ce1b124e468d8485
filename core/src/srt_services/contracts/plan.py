"""The Plan: everything the runtime will do, as plain data.

A Plan is a pure function of (recipe, allocation, plugin set). It is what ``srt dry-run``
prints, what ``srt dry-run --json`` and ``plan.json`` hold, and exactly what ``srt run``
executes: the runtime makes no decision the plan does not record (which argv, which env,
which node, which probe, which order). Plain dataclasses, not slotted ones: orjson
serialises an instance through its ``__dict__`` about twice as fast as through slots,
which is a tenth of the per-service budget of a 10,000-service dry-run, while the memory a
shared-key ``__dict__`` adds is a few hundred bytes per instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PLAN_VERSION = 1

#: Launch order of the job's phases.
PHASE_ORDER: tuple[str, ...] = (
    "infra",
    "before_workers",
    "workers",
    "frontend",
    "after_frontend",
    "benchmark",
)

#: Shutdown tiers: 0 stops first (workers, frontend, late services), infra last.
TIER_OF_PHASE = {
    "benchmark": 0,
    "after_frontend": 0,
    "frontend": 0,
    "workers": 0,
    "before_workers": 1,
    "infra": 2,
}
#: The tier of kinds that stop after everything else (``ServiceKind.stops_last``).
LAST_TIER = max(TIER_OF_PHASE.values()) + 1


@dataclass
class PlannedProbe:
    probe: str
    config: dict[str, Any]
    timeout: float
    interval: float
    describe: str
    #: liveness only
    period: float | None = None
    failure_threshold: int | None = None
    attempt_timeout: float | None = None


@dataclass
class PlannedInstance:
    step: str
    unit: str
    node: str
    node_ip: str
    index: int
    argv: list[str]
    env: dict[str, str]
    log: str
    work_dir: str
    preamble: str | None = None
    cwd: str | None = None
    readiness: PlannedProbe | None = None
    liveness: PlannedProbe | None = None
    ports: list[int] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    worker: str | None = None
    gpus: list[int] | None = None
    container: str | None = None
    cpus_per_task: int | None = None
    cpu_bind: str | None = None
    srun_options: dict[str, str] = field(default_factory=dict)
    stop_signal: str = "TERM"
    #: the recipe's ``mounts``, for an instance that runs in a container
    mounts: list[str] = field(default_factory=list)
    #: how a Slurm job starts it: ``agent`` (its node's srt agent) or ``step`` (an ``srun``
    #: step of its own); ``None`` outside Slurm (see ``Plan.slurm_launcher``)
    via: str | None = None
    #: every node of one launch across several nodes (an MPI worker), ``node`` first; empty
    #: for an instance on one node. Its ``ports`` are claimed on ``node`` only: they are
    #: what its leader rank listens on
    nodes: list[str] = field(default_factory=list)
    #: tasks the launch starts on each of ``nodes`` (``None``: one process on ``node``)
    tasks_per_node: int | None = None

    def all_nodes(self) -> list[str]:
        """The nodes the instance runs on: ``nodes``, or its one ``node``."""
        return self.nodes or [self.node]


@dataclass
class PlannedBuild:
    """Clone and build a source checkout before the first launch: on every node of the
    unit (``scope`` ``node``, each in its own node-local ``src_dir/<node>``), or once in the
    shared job directory (``shared``)."""

    git: str
    checkout: str
    rev: str
    src_dir: str
    path: str | None
    build_command: list[str] | None
    timeout: float
    nodes: list[str]
    env: dict[str, str] = field(default_factory=dict)
    scope: str = "node"

    def checkout_dir(self, node: str) -> str:
        """Where ``node``'s instances find the checkout (before ``path``)."""
        return f"{self.src_dir}/{node}" if self.scope == "node" else self.src_dir


@dataclass
class PlannedRestart:
    policy: str
    backoff_initial: float
    backoff_max: float
    max_failures: int
    window: float
    reset_after: float
    jitter: float


@dataclass
class PlannedUnit:
    """A service, a role's workers, the frontend or the benchmark, with its instances."""

    name: str
    category: str  # service | workers | frontend | benchmark
    type: str
    phase: str
    tier: int
    critical: bool
    terminal: bool
    stop_grace: float
    instances: list[PlannedInstance]
    placement: str | None = None
    per: str | None = None
    pool: str | None = None
    implied_by: str | None = None
    replaces_implied: str | None = None
    #: ``services[].after`` as written: ``None`` waits for the unit before it in its phase
    after: list[str] | None = None
    external: str | None = None
    container: str | None = None
    build: PlannedBuild | None = None
    restart: PlannedRestart | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    inherit_discovery_env: bool = True
    nodes: list[str] = field(default_factory=list)
    timeout: float | None = None
    warnings: list[str] = field(default_factory=list)
    #: the kind's probe over every instance (``ServiceKind.fleet_readiness``)
    fleet: PlannedProbe | None = None

    @property
    def label(self) -> str:
        """How messages name it: ``services[x]`` like the recipe, or the unit's own name."""
        return f"services[{self.name}]" if self.category == "service" else self.name


@dataclass
class PlannedNode:
    name: str
    ip: str
    roles: list[str]


@dataclass
class ScrapeTarget:
    """One Prometheus endpoint of one instance (see :mod:`.targets`)."""

    #: ``<endpoint name>_<node>``: the ``instance`` label
    name: str
    #: the unit: a service's name, a role (``prefill``...) or ``frontend``
    service: str
    url: str
    node: str
    #: the instance serving it: srt lists the target only while that process runs
    step: str = ""
    #: ``service``, the workers' role, or ``frontend``
    role: str = "service"
    #: ``host:port`` and the path, as Prometheus's ``file_sd`` wants them
    address: str = ""
    path: str = "/metrics"


@dataclass
class LocalNetwork:
    """How a local job's virtual nodes are networked, decided by planning.

    ``shared``: every virtual node is a loopback address (127.0.0.x) of this machine's one
    network namespace. ``namespaces``: every virtual node is a network namespace of its own
    with one address on a private bridge the job creates; the names below are what the
    launcher creates and what the cleanup of a killed orchestrator removes, and nothing
    else. All names carry :attr:`tag` (from the job directory), so two jobs never share one.
    """

    mode: str
    #: why this mode (what ``srt run`` prints)
    why: str
    tag: str = ""
    #: the job directory whose job owns these objects (the bridge's alias says it too)
    owner: str = ""
    bridge: str = ""
    subnet: str = ""
    #: the bridge's own address: the orchestrator's side of the job's network
    host_ip: str = ""
    #: virtual node -> the name of its network namespace (``/run/netns/<name>``)
    namespaces: dict[str, str] = field(default_factory=dict)
    #: virtual node -> its address on the bridge (``eth0`` in its namespace)
    addresses: dict[str, str] = field(default_factory=dict)
    #: virtual node -> the host end of its veth pair (on the bridge)
    veths: dict[str, str] = field(default_factory=dict)
    #: ports listened on at 127.0.0.1 and relayed to ``{"node", "address", "port",
    #: "unit"}``: what the job exposes to the machine (the frontend's port)
    forwards: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Plan:
    version: int
    job_name: str
    job_id: str
    job_dir: str
    allocation: str  # local | slurm | symbolic
    nodes: list[PlannedNode]
    head: str
    infra: str
    client: str
    units: list[PlannedUnit]
    phases: dict[str, list[str]]
    discovery_env: dict[str, str]
    ports: list[dict[str, Any]]
    scrape_targets: list[ScrapeTarget]
    warnings: list[str] = field(default_factory=list)
    #: the job's node-local directory on every node (``{local_dir}`` lives under it)
    local_dir: str | None = None
    #: how a Slurm job launches its instances: ``steps`` (an ``srun`` step each) or
    #: ``agents`` (one srt agent per node runs them; each instance's ``via`` says which it
    #: takes); ``None`` for a plan that does not run in a Slurm allocation
    slurm_launcher: str | None = None
    #: the recipe's ``env_passthrough`` (names and ``PREFIX_*``), beside the site's list
    env_passthrough: list[str] = field(default_factory=list)
    #: a local plan's network (``None`` for Slurm and symbolic plans)
    local_network: LocalNetwork | None = None

    def local_dir_nodes(self) -> list[str]:
        """The nodes where the job makes something under :attr:`local_dir` (an instance that
        names its ``{local_dir}``, a checkout built on every node): where it is removed at
        the end. Empty for a job that keeps nothing node-local."""
        root = self.local_dir
        if not root:
            return []
        nodes: dict[str, None] = {}
        for unit in self.units:
            if unit.build is not None and unit.build.scope == "node":
                nodes.update(dict.fromkeys(unit.build.nodes))
            for i in unit.instances:
                if i.node not in nodes and _names(root, i):
                    nodes.update(dict.fromkeys(i.all_nodes()))
        return list(nodes)

    def unit(self, name: str) -> PlannedUnit:
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(name)

    def instances(self) -> list[PlannedInstance]:
        return [i for u in self.units for i in u.instances]

    def to_json(self, indent: bool = False) -> bytes:
        import orjson

        option = orjson.OPT_INDENT_2 if indent else 0
        return orjson.dumps(self, option=option | orjson.OPT_APPEND_NEWLINE)

    @classmethod
    def from_json(cls, data: bytes | str) -> Plan:
        """The plan ``to_json`` wrote (``plan.json``, ``srt dry-run --json``), validated by
        this same model: one schema writes and reads it, wherever it is read (the job
        directory's readers, ``srt stop`` after a dead orchestrator, plugins through
        ``extend``). A document of another shape raises ``ValueError`` naming the field."""
        plan: Plan = _plan_adapter().validate_json(data)
        return plan


def _plan_adapter() -> Any:
    """The validator of :class:`Plan`, built on first use (pydantic is not imported by
    ``srt --help``) and kept."""
    global _ADAPTER
    if _ADAPTER is None:
        from pydantic import TypeAdapter

        _ADAPTER = TypeAdapter(Plan)
    return _ADAPTER


_ADAPTER: Any = None


def _names(root: str, i: PlannedInstance) -> bool:
    """Whether an instance's argv, environment, preamble, files or directory name ``root``."""
    return (
        root in "\0".join(i.argv)
        or any(root in v for v in i.env.values())
        or (i.preamble is not None and root in i.preamble)
        or any(root in v for v in i.files.values())
        or (i.cwd is not None and i.cwd.startswith(root))
    )
