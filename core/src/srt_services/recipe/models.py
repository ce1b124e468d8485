"""The recipe as pydantic models: shapes, types, ranges and defaults.

Everything that depends on installed plugins (which kinds, probes and placements exist,
what a kind's ``options`` may hold) is checked afterwards in
:mod:`srt_services.checking.checks`, so these models are the same whatever is installed and
``srt schema`` / the recipe reference can be generated from them.

Field descriptions are user documentation: ``docs/recipe-reference.md`` is generated from
them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from srt_services.names import (
    ENV_NAME_PATTERN,
    NAME_PATTERN,
    PASSTHROUGH_PATTERN,
    env_name_problem,
    name_problem,
)
from srt_services.recipe.revs import is_full_sha, rev_problem

# --------------------------------------------------------------------------- scalar types
#
# The scalar rules are pydantic-core constraints (a regex, lax string mode), not Python
# validators: a 10,000-service recipe holds some 200,000 scalars, and a Python call for each
# cost more than the rest of its validation. The patterns are only the fast accept test:
# ``SCALAR_RULES`` below gives each one its word for the recipe reference and the message
# :mod:`srt_services.recipe.pydantic_errors` shows for a mismatch (``name_problem`` and
# friends, so the wording lives in one place).

#: At least one character that is not white space.
NON_BLANK = r"\S"
#: No NUL byte (an environment value cannot carry one).
NO_NUL = r"^[^\x00]*$"


class ScalarRule(NamedTuple):
    """What a pattern means: its word in the recipe reference, and why a value breaks it."""

    word: str
    problem: Callable[[str], str]


#: Every pattern the scalar types use; the docs and the error messages both read this.
SCALAR_RULES: dict[str, ScalarRule] = {
    NAME_PATTERN: ScalarRule("name", lambda v: name_problem(v) or "is not a valid name"),
    NON_BLANK: ScalarRule("non-blank text", lambda v: "must not be empty or blank"),
    ENV_NAME_PATTERN: ScalarRule(
        "variable name", lambda v: env_name_problem(v) or "is not a variable name"
    ),
    PASSTHROUGH_PATTERN: ScalarRule(
        "variable name or PREFIX_*",
        lambda v: "must be a variable name or a prefix ending in '*' (NCCL_*), got " + repr(v),
    ),
    NO_NUL: ScalarRule("text", lambda v: "environment values must not contain NUL"),
}

#: Numbers written without quotes are accepted where text is expected (``--port, 9000``).
#: Booleans and nulls are not: ``yes`` silently becoming ``True`` is YAML's best-known trap
#: (the error for them says to quote the word).
_NUMBERS_AS_TEXT = Field(strict=False, coerce_numbers_to_str=True)

Text = Annotated[str, _NUMBERS_AS_TEXT]
Arg = Annotated[str, _NUMBERS_AS_TEXT, StringConstraints(pattern=NON_BLANK)]
NonBlank = Annotated[str, StringConstraints(pattern=NON_BLANK)]
SafeName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)]
EnvValue = Annotated[str, _NUMBERS_AS_TEXT, StringConstraints(pattern=NO_NUL)]
Env = dict[EnvName, EnvValue]
PassthroughName = Annotated[str, StringConstraints(pattern=PASSTHROUGH_PATTERN)]
Port = Annotated[int, Field(ge=1, le=65535)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
#: Upper bounds that keep a typo (``nodes: 1000000000``) from planning for minutes or
#: exhausting memory; far above any real job (``srt dry-run --nodes`` has the same cap).
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 1024
NodeCount = Annotated[int, Field(ge=1, le=MAX_NODES)]

Phase = Literal["infra", "before_workers", "after_frontend"]

#: The KV connectors a vLLM role may name (vLLM's ``kv_connector`` classes, by the short
#: names the original tool used). ``lmcache-mp`` (``LMCacheMPConnector``) talks to an
#: LMCache server outside the engine, so it implies an ``lmcache-server`` service; ``nixl``
#: (``NixlConnector``), ``lmcache`` (``LMCacheConnectorV1``, in-process) and ``mooncake``
#: (the Mooncake store connector, whose master is always a declared service) imply none.
#: ``none`` on a role switches off the engine-level connector for that role.
Connector = Literal["none", "nixl", "lmcache", "lmcache-mp", "mooncake"]
CONNECTORS: tuple[str, ...] = ("none", "nixl", "lmcache", "lmcache-mp", "mooncake")
PHASES: tuple[str, ...] = ("infra", "before_workers", "after_frontend")


class StrictModel(BaseModel):
    """Unknown keys are errors; types are not coerced (numbers-as-text aside)."""

    model_config = ConfigDict(
        extra="forbid", strict=True, populate_by_name=True, allow_inf_nan=False
    )


# --------------------------------------------------------------------------- probes


class ProbeBlock(StrictModel):
    """Shared shape of ``readiness`` and ``liveness``: exactly one probe plus timing.

    Probe entries (``tcp``, ``http``, ``log``, ``file`` and any a plugin registers) are kept
    raw here and validated against the probe's own model once the plugin set is known.
    """

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    port: Port | None = Field(
        None,
        description="Shorthand for `tcp: {port: N}`: ready when the port accepts a connection.",
    )
    timeout_seconds: Seconds | None = Field(
        None,
        description="Per instance: the job fails when the probe has not passed by then."
        " Default 120 (a kind may set its own). A service's readiness with timing only (no"
        " probe) tunes its kind's default probe.",
    )
    interval_seconds: Seconds | None = Field(
        None,
        description="Longest gap between attempts (default 2). srt probes at once, then backs"
        " off from 5 ms, so quick services are seen within milliseconds.",
    )

    @property
    def probe_entries(self) -> dict[str, Any]:
        """Written probe entries, ``port`` expanded to ``tcp``."""
        entries = dict(self.__pydantic_extra__ or {})
        if self.port is not None:
            entries.setdefault("tcp", {"port": self.port})
        return entries


class ReadinessSpec(ProbeBlock):
    """When an instance counts as started. One probe: port, tcp, http, log, file or a plugin's."""


class LivenessSpec(ProbeBlock):
    """Ongoing health after readiness: ``failure_threshold`` failures in a row fail the instance."""

    period_seconds: Seconds = Field(10.0, description="Time between liveness checks.")
    failure_threshold: Count = Field(3, description="Consecutive failures that declare it failed.")
    attempt_timeout_seconds: Seconds = Field(
        1.0, description="A single liveness attempt that takes longer counts as a failure."
    )


class RestartSpec(StrictModel):
    """What happens when a non-critical service exits after it was ready."""

    policy: Literal["no", "on-failure", "always"] = Field(
        "on-failure",
        description="`on-failure` restarts after a non-zero exit or a signal; `always` also"
        " after exit 0; `no` leaves it down. Critical and terminal services never restart.",
    )
    backoff_initial_seconds: Seconds = Field(1.0, description="Delay before the first restart.")
    backoff_max_seconds: Seconds = Field(60.0, description="The delay doubles up to this.")
    max_failures: Count = Field(
        5, description="Failures within `failure_window_seconds` after which it stays down."
    )
    failure_window_seconds: Seconds = Field(600.0, description="Window for counting failures.")
    reset_after_seconds: Seconds | None = Field(
        None,
        description="Running this long resets the backoff (default: twice backoff_max_seconds).",
    )
    jitter: Annotated[float, Field(ge=0, le=1)] = Field(
        0.25, description="Random extra delay, as a fraction of the delay."
    )

    @model_validator(mode="after")
    def _max_not_below_initial(self) -> RestartSpec:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError(
                f"backoff_max_seconds ({self.backoff_max_seconds:g}) must not be below"
                f" backoff_initial_seconds ({self.backoff_initial_seconds:g})"
            )
        return self

    @property
    def reset_after(self) -> float:
        return self.reset_after_seconds or 2 * self.backoff_max_seconds


# --------------------------------------------------------------------------- uses


class UseSpec(StrictModel):
    """What a unit uses of a service for as long as it runs: admitted before it starts,
    released when it ends (the service's kind says what it accepts: srt-oarbank's
    `oarbank` kind with `options.admissions: true`)."""

    service: SafeName = Field(description="The service (`services[].name`) it uses.")
    capability: NonBlank | None = Field(
        None,
        description="What of that service it needs, in the kind's words (srt-oarbank: a"
        " service or probe of the module; default: the service the entry runs).",
    )
    pool: NonBlank | None = Field(
        None, description="A pool of that service to reserve tokens of (the kind's name)."
    )
    tokens: Count | None = Field(
        None, description="Tokens of `pool` held while the unit runs (default 1 with a pool)."
    )
    mem_gb: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        None, description="Host memory the unit itself needs, charged while it runs."
    )

    @model_validator(mode="after")
    def _tokens_need_a_pool(self) -> UseSpec:
        if self.tokens is not None and self.pool is None:
            raise ValueError("tokens without a pool: name the pool the tokens are of")
        return self


_USES_DESCRIPTION = (
    "Services this unit uses while it runs (`[{service, capability, pool, tokens, mem_gb}]`):"
    " srt admits it before its process starts and releases when it ends; a refused admission"
    " fails the unit with the service's reason. Checked against the service's kind."
)

# --------------------------------------------------------------------------- services


class PlacementSpec(StrictModel):
    """Where a service's instances run."""

    node: str | None = Field(
        None,
        description="head | infra | dedicated | prefill | decode | agg | workers | compute |"
        " all (or a plugin's). Default: the kind's (generic: head).",
    )
    pool: SafeName | None = Field(
        None,
        description="Ride on the nodes another service owns (`nodes:`), one instance per node"
        " of that pool. Replaces `node`.",
    )
    per: str | None = Field(
        None,
        description="`node` (default): one instance per placed node. `worker`: one per engine"
        " worker on those nodes, in that worker's GPU view.",
    )

    @model_validator(mode="after")
    def _node_or_pool(self) -> PlacementSpec:
        if self.pool is not None and self.node is not None:
            raise ValueError("give either node or pool, not both")
        return self


class MetricsSpec(StrictModel):
    """A Prometheus endpoint the service serves."""

    port: Port = Field(description="Port of the endpoint on every node the service runs on.")
    path: str = Field(
        "/metrics",
        description="HTTP path; may use the instance's placeholders (`{node}`, `{index}`...).",
    )
    nodes: Literal["all", "first"] = Field(
        "all", description="`first` scrapes only the service's first node."
    )
    name: SafeName | None = Field(
        None, description="Endpoint name (default: the service name); required with several."
    )

    @field_validator("path")
    @classmethod
    def _path_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, dict) else value


class SourceSpec(StrictModel):
    """A git checkout at an immutable revision, cloned before the service is built."""

    git: NonBlank = Field(description="Repository URL or path.")
    rev: NonBlank = Field(
        description="A full commit SHA, a tag or refs/pull/<n>/head. Branches, revision"
        " expressions (HEAD~1) and abbreviated SHAs are refused; `srt apply` and `srt run`"
        " resolve a name with `git ls-remote` and refuse one that is a branch."
    )
    path: NonBlank | None = Field(None, description="Subdirectory to build and run from.")
    sha: str | None = Field(
        None, description="The commit `rev` resolved to (written by `srt apply`)."
    )

    @field_validator("rev")
    @classmethod
    def _immutable(cls, value: str) -> str:
        rev = value.strip()
        problem = rev_problem(rev)
        if problem is not None:
            raise ValueError(problem)
        return rev.lower() if is_full_sha(rev.lower()) else rev

    @field_validator("sha")
    @classmethod
    def _sha(cls, value: str | None) -> str | None:
        if value is not None and not is_full_sha(value):
            raise ValueError(f"must be a full commit SHA (40 lowercase hex digits), got {value!r}")
        return value

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/")):
            raise ValueError("must be a relative path inside the checkout")
        return value

    @property
    def checkout(self) -> str:
        return self.sha or self.rev


class ServiceSpec(StrictModel):
    """One long-running process next to the job's workers (spec: services.md)."""

    name: SafeName = Field(description="Unique. Names the step and log `service_<name>...`.")
    type: NonBlank = Field("generic", description="A registered service kind.")
    enabled: bool = Field(True, description="`false` drops it (and switches an implied one off).")
    external: NonBlank | None = Field(
        None,
        description="Kinds that allow it: the address of an instance that already runs"
        " (`scheme://host:port`, or several separated by commas); nothing launches and"
        " consumers get this address.",
    )
    command: list[Arg] | None = Field(
        None, description="Argv, not shell-interpreted. Required for `generic`."
    )
    args: list[Arg] = Field(default_factory=list, description="Appended to the command.")
    container: Text | None = Field(
        None,
        description="Image or site alias (default: the kind's fallback, then the job"
        " container; Slurm/pyxis only).",
    )
    env: Env = Field(default_factory=dict, description="Environment; see the layering rules.")
    options: dict[str, Any] = Field(
        default_factory=dict, description="Kind-specific settings, checked by the kind."
    )
    placement: PlacementSpec | None = Field(None, description="Where instances run.")
    nodes: NodeCount | None = Field(
        None, description="Own this many whole nodes (a pool added to the allocation)."
    )
    start: Phase | None = Field(
        None, description="infra | before_workers | after_frontend (default: the kind's)."
    )
    after: list[SafeName] | None = Field(
        None,
        description="Start once these services are ready, instead of after the ones declared"
        " before it in its phase; `[]` starts it with its phase. Services of earlier phases"
        " are always ready first.",
    )
    readiness: ReadinessSpec | None = Field(None, description="Probe gating the next launches.")
    liveness: LivenessSpec | None = Field(None, description="Probe checked after readiness.")
    restart: RestartSpec | None = Field(
        None, description="Restart policy for non-critical services (default on-failure)."
    )
    inherit_discovery_env: bool = Field(
        True, description="Give it ETCD_ENDPOINTS / NATS_SERVER for the planes that run."
    )
    critical: bool | None = Field(
        None, description="Any exit after readiness fails the job (default: the kind's)."
    )
    terminal: bool = Field(
        False, description="The job ends when every instance of every terminal service exited."
    )
    metrics: Annotated[list[MetricsSpec], BeforeValidator(_one_or_many)] = Field(
        default_factory=list, description="Prometheus endpoints (one mapping or a list)."
    )
    preamble: str | None = Field(None, description="Shell run by bash before `exec` of the argv.")
    cpus_per_task: Count | None = Field(None, description="srun --cpus-per-task.")
    cpu_bind: NonBlank | None = Field(None, description="srun --cpu-bind.")
    srun_options: dict[str, Text] = Field(
        default_factory=dict, description="Extra srun options (`key: value`, or `key: ''`)."
    )
    uses: list[UseSpec] = Field(default_factory=list, description=_USES_DESCRIPTION)
    source: SourceSpec | None = Field(None, description="Clone this before build and launch.")
    build_command: list[Arg] | None = Field(
        None, description="Run once from the checkout before launch."
    )
    build_scope: Literal["node", "shared"] = Field(
        "node",
        description="`node`: clone and build on every node of the placement, in a node-local"
        " directory (removed when the job ends), so what the build installs is on each node."
        " `shared`: clone and build once in the job directory (`src/<name>`), for builds whose"
        " only output is files in the checkout.",
    )
    build_timeout_seconds: Seconds = Field(1800.0, description="The build is killed after this.")
    stop_grace_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        None, description="SIGTERM to SIGKILL grace at teardown (default: the kind's, 30 s)."
    )

    @field_validator("command")
    @classmethod
    def _not_empty_list(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("if set, must not be empty (omit it to use the default)")
        return value

    @field_validator("build_command")
    @classmethod
    def _not_empty_build(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("if set, must not be empty (omit it when nothing needs building)")
        return value


# --------------------------------------------------------------------------- the job


class ResourcesSpec(StrictModel):
    """What every node of the allocation has."""

    gpus_per_node: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)] = Field(
        8, description="GPUs on every node of the allocation."
    )
    layout: Literal["roles", "packed"] = Field(
        "roles",
        description="`roles`: each role's workers on nodes of its own (`roles.<role>.nodes`)."
        " `packed` (srtctl's placement): the roles' nodes are pooled and the workers laid"
        " over them in the order prefill, decode, agg, each packed at the next free GPU"
        " (a worker of a node or more takes whole nodes), decode starting on a fresh node"
        " when one is left; nodes or GPUs left over sit idle (a plan warning says which).",
    )
    spread_workers: bool = Field(
        False, description="`packed`: every worker narrower than a node gets a node of its own."
    )
    colocate: bool = Field(
        False,
        description="`packed`: decode packs on straight after prefill (no fresh node), and the"
        " worker nodes are as few as the GPUs of all workers need (vLLM prefill/decode"
        " colocation).",
    )


#: The backends a role's workers may run (``engine.type``); ``mocker`` is Dynamo's engine
#: simulator (scheduling and KV cache without a GPU).
BACKENDS: tuple[str, ...] = ("sglang", "vllm", "trtllm", "mocker")


class EngineSpec(StrictModel):
    """The inference engine the workers run: which backend, which model, and the settings the
    frontend's engine plugin turns into the workers' commands (decides implied services such
    as `gms`)."""

    type: Literal["sglang", "vllm", "trtllm", "mocker"] = Field(
        "vllm",
        description="Inference backend of the workers: sglang | vllm | trtllm | mocker (Dynamo's"
        " simulator, no GPU).",
    )
    model: NonBlank | None = Field(
        None,
        description="The model the workers serve: a directory (on every node, or mounted into"
        " the container) or a hub id. Given to the workers the engine plugin builds.",
    )
    served_model_name: NonBlank | None = Field(
        None,
        description="The name clients ask for (default: the last part of `model`).",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings of the frontend's engine plugin (`frontend.type`), checked by it:"
        " see the plugin's README (srt-dynamo: planes, ports, the mocker's knobs...).",
    )
    failover: bool = Field(
        False,
        description="Shadow engine recovery: `true` implies one `gms` (GPU Memory Service) per"
        " worker, which needs the srt-gms plugin (`pip install srt-gms`).",
    )
    connector: Connector | None = Field(
        None,
        description="vLLM KV connector of every role (a role's own `connector` wins):"
        " `lmcache-mp` implies an `lmcache-server` on the nodes of the roles that use it,"
        " which needs the srt-lmcache plugin (`pip install srt-lmcache`); `nixl`, `lmcache`"
        " and `mooncake` imply no service. vLLM only.",
    )


class DynamoSpec(StrictModel):
    """Dynamo transport planes (only with `frontend.type: dynamo`)."""

    request_plane: Literal["tcp", "nats", "http"] = Field(
        "tcp", description="`nats` implies NATS, which needs the srt-nats plugin."
    )
    event_plane: Literal["zmq", "nats"] = Field(
        "zmq", description="`nats` implies NATS, which needs the srt-nats plugin."
    )


class ProcessSpec(StrictModel):
    """Shared shape of the job's own processes (workers, frontend, benchmark)."""

    command: list[Arg] | None = Field(None, description="Argv.")
    args: list[Arg] = Field(default_factory=list, description="Appended to the command.")
    env: Env = Field(default_factory=dict, description="Environment (placeholders allowed).")
    container: Text | None = Field(
        None, description="Image or site alias (default: the job container; Slurm/pyxis only)."
    )
    preamble: str | None = Field(None, description="Shell run by bash before `exec`.")
    stop_grace_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        None, description="SIGTERM to SIGKILL grace at teardown."
    )
    uses: list[UseSpec] = Field(default_factory=list, description=_USES_DESCRIPTION)

    @field_validator("command")
    @classmethod
    def _not_empty_list(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("if set, must not be empty")
        return value


class RoleSpec(ProcessSpec):
    """Engine workers of one role (prefill, decode or agg)."""

    workers: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(1, description="Number of workers.")
    gpus_per_worker: Count | None = Field(
        None, description="GPUs per worker (default: a whole node). May span nodes."
    )
    nodes: NodeCount | None = Field(
        None, description="Nodes for this role (default: as few as the workers need)."
    )
    port: Port | None = Field(
        None,
        description="Base port: the worker in slot k of a node serves on port+k, exposed as"
        " `{worker_port}`; probes without a port use it.",
    )
    readiness: ReadinessSpec | None = Field(None, description="Worker health probe.")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="The backend's own settings for this role's workers (`tensor-parallel-size:"
        " 4`), which the frontend's engine plugin turns into the backend's flags (or its config"
        " file). Only for roles whose command the engine builds.",
    )
    connector: Connector | None = Field(
        None,
        description="This role's vLLM KV connector, over `engine.connector`; `none` uses no"
        " connector. `lmcache-mp` implies an `lmcache-server` on the role's nodes (needs"
        " srt-lmcache).",
    )
    metrics: Annotated[list[MetricsSpec], BeforeValidator(_one_or_many)] = Field(
        default_factory=list,
        description="Prometheus endpoints of each worker (one mapping or a list), scraped on"
        " its first node. Like `port`, `port` is a base: the worker in slot k of a node serves"
        " on port+k.",
    )


class BalancerSpec(StrictModel):
    """nginx in front of several frontend replicas (round robin, or sticky on a header)."""

    image: Text = Field(
        "nginx:1.27.4", description="Its image (Slurm/pyxis; locally: `nginx` on PATH)."
    )
    raise_ulimit: bool = Field(False, description="`ulimit -n 1048576` before it starts.")
    session_affinity_header: NonBlank | None = Field(
        None, description="Send requests that carry this header's value to one replica."
    )
    keepalive_timeout: NonBlank = Field("600s", description="nginx keepalive_timeout.")


class FrontendSpec(ProcessSpec):
    """The job's public endpoint, started on the head node after the workers."""

    type: NonBlank = Field(
        "dynamo",
        description="The serving stack: `dynamo` (implies etcd, which needs the srt-etcd plugin)"
        " | `sglang` | `vllm` | `trtllm-serve` | an engine a plugin registers | `none` (no"
        " frontend). Its engine plugin (srt-dynamo, srt-direct) builds the frontend and the"
        " workers that write no `command`.",
    )
    port: Port = Field(8000, description="Public port, given to the benchmark.")
    readiness: ReadinessSpec | None = Field(None, description="Frontend health probe.")
    metrics: Annotated[list[MetricsSpec], BeforeValidator(_one_or_many)] = Field(
        default_factory=list,
        description="Prometheus endpoints the frontend serves (one mapping or a list).",
    )
    replicas: Annotated[int, Field(ge=1, le=1024)] = Field(
        1,
        description="Frontends run: more than one puts them on the worker nodes other than"
        " the head (one each, listening on `internal_port`) behind a balancer (nginx) on the"
        " head node's `port`.",
    )
    internal_port: Port = Field(
        8180, description="Where the replicas listen when there are several."
    )
    balancer: BalancerSpec = Field(
        default_factory=BalancerSpec,
        description="The nginx in front of several replicas.",
    )


class ObservabilitySpec(StrictModel):
    """Metrics collection for the job."""

    metrics: bool = Field(
        True,
        description="Collect the job's metrics: the exporters (node, DCGM, process) and the"
        " Prometheus that srt-exporters implies, and the scrape targets srt keeps in"
        " `<job_dir>/metrics/targets.json`. `false`: none of them. Written as `true` without"
        " srt-exporters, the recipe is refused; left at its default without it, the job runs"
        " without them and srt warns.",
    )


class BenchmarkSpec(ProcessSpec):
    """The client step that runs once the frontend is ready."""

    type: NonBlank = Field(
        "manual",
        description="`command` runs `command` after the frontend and ends the job with its exit"
        " status; `manual` serves until stopped (or until terminal services end); a benchmark"
        " plugin's name (`sa-bench`, `gsm8k`... from srt-benchmarks) builds the command from"
        " `options`.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings of a benchmark plugin (`benchmark.type`), checked by it.",
    )
    timeout_seconds: Seconds | None = Field(None, description="Kill the benchmark after this.")
    dedicated_node: bool = Field(False, description="Run the client on a node of its own.")


class SlurmSpec(StrictModel):
    """How ``srt apply`` asks Slurm for the allocation (the site config gives defaults)."""

    partition: NonBlank | None = Field(None, description="sbatch --partition.")
    account: NonBlank | None = Field(None, description="sbatch --account.")
    time: NonBlank | None = Field(None, description="sbatch --time (e.g. 02:00:00).")
    qos: NonBlank | None = Field(None, description="sbatch --qos.")
    sbatch_extra: list[NonBlank] = Field(
        default_factory=list,
        description="Extra sbatch options, one per item (e.g. `--exclusive`), written as #SBATCH lines.",
    )
    signal_before_end_seconds: Annotated[int, Field(ge=0)] = Field(
        60,
        description="Ask Slurm for SIGTERM this long before the time limit (`--signal=B:TERM@N`),"
        " so teardown finishes before the job is killed. 0 disables it.",
    )
    no_kill: bool = Field(
        True,
        description="Keep the job when a node fails (`--no-kill`), so srt can report the failure"
        " and stop the other nodes in order.",
    )
    launcher: Literal["steps", "agents"] | None = Field(
        None,
        description="How the instances start inside the allocation: `steps` (an `srun` step"
        " each) or `agents` (one srt agent per node starts its node's instances; an instance"
        " with a `container`, `cpus_per_task`, `cpu_bind` or `srun_options` still gets its own"
        " step). Default: the site's `[slurm] launcher`, else `agents` above the site's"
        " `agents_above_nodes` (8) nodes. See docs/slurm.md.",
    )


RoleName = Literal["prefill", "decode", "agg"]
ROLE_NAMES: tuple[str, ...] = ("prefill", "decode", "agg")


class Recipe(StrictModel):
    """A job: its engine workers, frontend, benchmark and services."""

    schema_version: Literal[2] = Field(alias="schema", description="Recipe format version: 2.")
    name: SafeName = Field(description="Job name (used in job directory names).")
    resources: ResourcesSpec = Field(
        default_factory=ResourcesSpec, description="Node shape (GPUs per node)."
    )
    container: Text | None = Field(
        None,
        description="The job container: an image or site alias that the workers, the frontend,"
        " the benchmark and the services run in unless they set their own `container` (a"
        " kind's fallback, such as the Mooncake stores' master image, comes first; host-native"
        " kinds run on the bare node). Slurm/pyxis only: `srt run` warns that it does not"
        " apply it.",
    )
    mounts: list[NonBlank] = Field(
        default_factory=list,
        description="`host:container[:options]` mounts of every process that runs in a"
        " container (the model directory at `/model`, a dataset): beside the site's"
        " `[containers] mounts`. Slurm/pyxis only.",
    )
    env_passthrough: list[PassthroughName] = Field(
        default_factory=list,
        description="Variables of the shell that runs srt which every process of the job"
        " inherits, beside the built-in allow-list (`PATH`, `HOME`, `LANG`, `LC_*`...) and"
        " the site's `[env] passthrough`: names (`HF_TOKEN`, `LD_LIBRARY_PATH`) or prefixes"
        " ending in `*` (`NCCL_*`). A prefix never passes `SRT_*`, `LD_PRELOAD`, `LD_AUDIT`"
        " or `PYTHONSTARTUP`.",
    )
    engine: EngineSpec = Field(default_factory=EngineSpec, description="Inference engine.")
    dynamo: DynamoSpec = Field(default_factory=DynamoSpec, description="Dynamo planes.")
    frontend: FrontendSpec | None = Field(None, description="Absent means `type: none`.")
    roles: dict[RoleName, RoleSpec] = Field(
        default_factory=dict, description="Engine workers by role."
    )
    observability: ObservabilitySpec = Field(
        default_factory=ObservabilitySpec, description="Metrics exporters on or off."
    )
    benchmark: BenchmarkSpec = Field(
        default_factory=BenchmarkSpec, description="The benchmark client (default: manual)."
    )
    slurm: SlurmSpec = Field(
        default_factory=SlurmSpec, description="sbatch settings for `srt apply`."
    )
    services: list[ServiceSpec] = Field(
        default_factory=list,
        description="Long-running processes next to the workers, in launch order per phase.",
    )

    @property
    def frontend_type(self) -> str:
        return self.frontend.type if self.frontend else "none"

    def role_connector(self, role: str) -> str | None:
        """The KV connector ``role``'s workers use: its own, else the engine's; ``None``
        when it has none (unset, or ``none``) or the role is not in the recipe."""
        spec = self.roles.get(role)  # type: ignore[call-overload]
        if spec is None:
            return None
        found = spec.connector or self.engine.connector
        return None if found in (None, "none") else found
