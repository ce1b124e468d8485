"""The service-kind interface.

A kind supplies *defaults* and *knowledge* (what command an etcd needs, which ports it
binds, what its consumers must be told); the launch path is the same for every kind. All
methods are pure: they describe, the runtime acts. Strings a kind returns for argv, env,
preamble and files may use the recipe's placeholders (``{node_ip}``, ``{work_dir}``...);
the planner renders them exactly like the recipe's own values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict
from srt_services.contracts.context import InstanceContext, Node
from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.contracts.plan import PlannedInstance
    from srt_services.recipe.models import MetricsSpec, Recipe, ServiceSpec, UseSpec


class NoOptions(BaseModel):
    """Options model of a kind that takes none: any key is an error."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class KindOptions(BaseModel):
    """Base for kind options models: strict and closed, like the recipe itself."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class DefaultProbe:
    """A readiness probe a kind asks for when the recipe writes none."""

    __slots__ = ("config", "interval", "name", "timeout")

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        timeout: float | None = None,
        interval: float | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.timeout = timeout
        self.interval = interval


#: Job-wide placeholders whose value a service decides (:meth:`ServiceKind.job_placeholders`);
#: srt's defaults stand when no service gives one.
KIND_PLACEHOLDERS: frozenset[str] = frozenset({"master_port", "metadata_port"})


class ServiceKind:
    """Base class of every service kind. Subclass it and set ``name``.

    Class attributes are the kind's defaults and capabilities; override methods to supply
    commands and environment. A recipe value always wins over a kind default, except for
    the values :meth:`forced_env` returns (the ones the kind must own to work at all).
    """

    #: The ``type:`` value that selects this kind. Unique across the plugin set.
    name: ClassVar[str]
    #: One line for ``srt kinds`` and the docs.
    summary: ClassVar[str] = ""
    #: How the kind's default readiness reads in ``srt kinds`` (``http /health on 2379``).
    readiness_summary: ClassVar[str] = ""
    #: Model for ``options``; unknown keys are refused naming the kind. The validated
    #: instance the hooks receive is read-only: services that write no options share one.
    Options: ClassVar[type[BaseModel]] = NoOptions

    default_start: ClassVar[str] = "after_frontend"
    default_critical: ClassVar[bool] = False
    default_placement: ClassVar[str] = "head"
    default_per: ClassVar[str] = "node"
    #: ``placement.node`` values accepted; ``None`` accepts every registered placement.
    allowed_placements: ClassVar[frozenset[str] | None] = None
    supports_external: ClassVar[bool] = False
    #: URL schemes accepted for ``external`` (``("http", "https")`` for etcd).
    external_schemes: ClassVar[tuple[str, ...]] = ()
    #: ``options`` keys that still mean something with ``external``: they shape what
    #: consumers are told (the Mooncake master's metadata port and protocol), so srt does
    #: not warn that they have no effect. Every other option is unused then.
    external_options: ClassVar[frozenset[str]] = frozenset()
    supports_dedicated: ClassVar[bool] = False
    #: Kinds that share the infra node must all be ``dedicated`` or none (etcd and nats).
    shares_infra_node: ClassVar[bool] = False
    #: A discovery plane never receives discovery environment itself.
    is_discovery_plane: ClassVar[bool] = False
    #: ``command`` must be written (``generic``), or the kind builds its own.
    requires_command: ClassVar[bool] = False
    #: The recipe may not write ``command`` (a kind that must own its argv).
    forbids_command: ClassVar[bool] = False
    default_stop_grace: ClassVar[float] = 30.0
    #: Signal that asks the service to stop cleanly (``INT`` for servers that treat TERM as
    #: an error exit); SIGKILL follows after the grace either way.
    stop_signal: ClassVar[str] = "TERM"
    default_readiness_timeout: ClassVar[float] = 120.0
    default_readiness_interval: ClassVar[float] = 2.0
    #: How ``srt kinds`` states the default readiness timeout when :meth:`readiness`
    #: computes it per entry (from a manifest, say) instead of using the number above;
    #: empty: the number is what runs.
    readiness_timeout_summary: ClassVar[str] = ""
    #: What makes a job run this kind without an entry (``frontend.type: dynamo``), for
    #: the kind-defaults table of ``docs/differences.md``; empty: only a declared entry.
    implied_by_summary: ClassVar[str] = ""
    #: The default command in a few words, for that table (default: the server binary).
    command_summary: ClassVar[str] = ""
    #: Where this kind's defaults differ from the services specification, and why: a
    #: column of the table (``placement``, ``start``, ``critical``, ``command``, ``ports``,
    #: ``readiness``, ``implied by``, ``environment``) -> the reason. The table is
    #: generated from the kinds, so a changed default shows up as a stale page in CI.
    spec_departures: ClassVar[Mapping[str, str]] = {}
    #: Stop after every other unit of the job, the discovery plane included (a metrics
    #: scraper keeps the last samples of everything it scrapes).
    stops_last: ClassVar[bool] = False
    #: Runs on the bare node (a host binary such as process-exporter): the job container
    #: is not inherited. A ``container`` the entry writes, or :meth:`container_fallback`,
    #: still applies.
    host_native: ClassVar[bool] = False
    #: Other units may name this service in ``uses:`` (:meth:`validate_use`,
    #: :meth:`use_command`); srt refuses a ``uses`` entry of any other kind.
    accepts_uses: ClassVar[bool] = False

    # ------------------------------------------------------------------ validation

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        """Problems with this entry beyond its options model (paths relative to the entry).

        Return paths like ``("placement", "node")``; the caller prefixes the entry's path.
        Called only when every entry of the recipe has a valid shape, so ``recipe`` is whole
        and other entries may be looked at.
        """
        return ()

    def validate_use(
        self, spec: ServiceSpec, options: Any, use: UseSpec, recipe: Recipe
    ) -> Iterable[Problem]:
        """Problems with one ``uses`` entry that names this service (paths relative to the
        entry: ``("pool",)``). Called for kinds with :attr:`accepts_uses` only, once every
        entry of the recipe is valid, so a capability or pool the kind can know before
        anything runs is refused here, with the entry's YAML line."""
        return ()

    def use_command(
        self,
        spec: ServiceSpec,
        options: Any,
        uses: Sequence[UseSpec],
        provider: PlannedInstance,
        user: PlannedInstance,
    ) -> list[str]:
        """``user``'s argv, wrapped so that what ``uses`` asks of this service is admitted
        before it starts and released when it ends.

        Called while the plan is built, once every unit is planned, for each instance of a
        unit whose ``uses`` name this service (all of its entries for this service at
        once); ``provider`` is this service's instance on the user's node. The argv is
        final (rendered): return a final one, ``user.argv`` at its end. A refusal should
        exit non-zero before that argv runs, with its reason in
        ``{user.work_dir}/srt-exit-reason`` (:data:`EXIT_REASON_FILE`), which srt shows in
        the ``exited`` event, ``srt status`` and the job's cause.
        """
        raise NotImplementedError(f"kind {self.name} accepts no uses")

    # ------------------------------------------------------------------ launch description

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str] | None:
        """Default argv (before ``args``) when the recipe writes no ``command``."""
        return None

    def preamble(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> str | None:
        """Shell the kind needs before the command (runs before the recipe's preamble)."""
        return None

    def default_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        """Environment defaults; the recipe's ``env`` overrides them."""
        return {}

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        """Environment the kind owns; recipe values for these keys are ignored (and warned)."""
        return {}

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        """Files to write before launch: name -> content. A name is relative to the
        instance's ``{work_dir}``, or ``{log_dir}/<name>`` for a file that belongs beside
        the job's logs (what the spec puts there); nothing is written elsewhere."""
        return {}

    def readiness(
        self, spec: ServiceSpec, options: Any, ctx: InstanceContext
    ) -> DefaultProbe | None:
        """The probe used when the recipe writes no ``readiness``."""
        return None

    def fleet_readiness(
        self, spec: ServiceSpec, options: Any, instances: Sequence[InstanceContext]
    ) -> DefaultProbe | None:
        """A probe over the whole service, run once every instance passed its own.

        For services whose instances form one thing (a Ray cluster: the head must list
        every member ALIVE): the phase waits for it, an instance that exits meanwhile
        fails it at once, and its timeout's message is the probe's last word (say which
        members are missing). ``instances`` are every instance's context, in launch order;
        the probe's config is rendered with the first one's values.
        """
        return None

    def container_fallback(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> str | None:
        """The image to use when the entry writes no ``container`` (the Mooncake stores
        run in the master's); ``None`` falls back to the job container (the recipe's
        top-level ``container``), unless the kind is :attr:`host_native`."""
        return None

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        """What the engine workers of ``role`` must be told about this service (an LMCache
        server's address for SGLang workers that use it).

        Layered over the discovery environment and under the role's own ``env`` (so a
        recipe value wins). Placeholders are rendered for each worker instance, so
        ``{node_ip}`` is the worker's own node. Called for every service that runs or is
        ``external``.
        """
        return {}

    def listen_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        """Ports the kind's own command binds on every node it runs on (for the port ledger)."""
        return ()

    def metrics(self, spec: ServiceSpec, options: Any) -> list[MetricsSpec]:
        """Prometheus endpoints when the recipe writes no ``metrics``."""
        return []

    def job_placeholders(self, spec: ServiceSpec, options: Any) -> dict[str, str]:
        """Values of the job-wide placeholders this service decides: the Mooncake master's
        ``{master_port}`` and ``{metadata_port}`` follow its ports when the recipe moves
        them. Only names in :data:`KIND_PLACEHOLDERS` count (the others are srt's own).
        Called for every service that runs or is ``external``.
        """
        return {}

    def discovery_env(self, spec: ServiceSpec, options: Any, address: str | None) -> dict[str, str]:
        """What consumers with ``inherit_discovery_env`` get from this service.

        ``address`` is the IP of the node it runs on, or ``None`` when ``external`` is set
        (then use ``spec.external``). Return ``{}`` for services nobody discovers.
        """
        return {}

    def service_facts(
        self, spec: ServiceSpec, options: Any, nodes: Sequence[Node]
    ) -> dict[str, str]:
        """What the benchmark is told about this service beyond where it runs.

        The benchmark step already gets ``SRT_SERVICE_<NAME>_NODES``, ``_IPS`` and
        ``_NODE_COUNT`` for every service; a kind whose clients need more (a Ray cluster's
        GCS address and dashboard URL) returns ``{KEY: value}`` here and the benchmark gets
        ``SRT_SERVICE_<NAME>_<KEY>``. ``nodes`` are the service's nodes in launch order (the
        first is its first instance's). Keys are spelled like the name (upper case, other
        characters ``_``); core's own keys win. Values are plain text (no placeholders),
        because they describe the service, not the benchmark's node.
        """
        return {}

    def skip_reason(self, spec: ServiceSpec, options: Any) -> str | None:
        """Why this service cannot run on this machine (checked at launch, not at dry-run)."""
        return None

    def wildcard_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        """Ports this service binds on every interface (``0.0.0.0``) whatever address it is
        given. Local virtual nodes (127.0.0.x) share one network, so such a port blocks
        the same port on every other virtual node: the plan of a local run refuses two
        nodes that would both use it, naming the services."""
        return ()

    def local_options(self, spec: ServiceSpec, options: Any) -> Any:
        """The options for a plan that runs on this machine's virtual nodes now (``srt run``
        without Slurm; never a cluster's batch step, whose nodes are the job's): a kind may
        move a default port the recipe did not write to a free one, so that two local jobs
        on one machine never collide on a port srt chose. Return ``options`` unchanged (the
        default), or a changed copy; never mutate it (it is shared)."""
        return options
