"""The srt service kind ``oarbank``: one service of a protocol-1 module, run by our agent.

The instance srt launches is ``python -m srt_oarbank.agent`` for that one service: the agent
starts it through the module's executable (or adopts it if it already runs), restarts it
with backoff, and on SIGTERM stops it through the protocol and reaps its owned objects. So
srt's readiness is the protocol's ``ready`` (probe ``oarbank-ready``), srt's stop is the
protocol's ``stop`` plus reaping, and ``critical`` means what it means for any service.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import DefaultProbe, KindOptions, Problem, ServiceKind, processes

from srt_oarbank.srt.sandbox_options import SandboxApproval

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, PlannedInstance, Recipe, ServiceSpec, UseSpec

OPS = ("fingerprint", "start", "stop", "status", "ready", "list_owned", "destroy")
DEFAULT_STOP_S = 120.0
#: The agent's budget for ``destroy --force`` after a failed stop (its escalation).
ESCALATION_S = 60.0
#: Reaping and checking the owned objects after the stop.
TEARDOWN_MARGIN_S = 10.0
#: srt's readiness budget beyond the agent's own: starting the agent's interpreter, loading
#: the bundle and one poll interval.
READY_MARGIN_S = 30.0


class OarbankOptions(KindOptions):
    bundle: str = Field(description="Module bundle directory (holds oarbank-module.json).")
    service: str = Field(description="Name of the service in the module's manifest.")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Module settings for this node (OARBANK_SETTINGS_FILE), handed over "
        "unchanged: srt renders no placeholder in them.",
    )
    tools: dict[str, Any] = Field(
        default_factory=dict, description="Granted host tools (OARBANK_TOOLS_FILE), unchanged."
    )
    limits: dict[str, Any] = Field(
        default_factory=dict, description="The owner's caps (OARBANK_LIMITS_FILE), unchanged."
    )
    node_id: str = Field("{node}", description="OARBANK_NODE_ID (placeholders allowed).")
    timeouts: dict[str, float] = Field(
        default_factory=dict, description="Per-op timeout overrides in seconds (op: seconds)."
    )
    reap_period_seconds: float = Field(
        60.0,
        gt=0,
        description="How often the agent destroys owned objects of the job's attempts that "
        "died (an attempt is one instance of a unit: srt.<job id>.<step>); at the job's end "
        "every attempt counts as gone.",
    )
    sandbox: SandboxApproval = Field(
        default_factory=SandboxApproval,
        description="What the site approves for a module whose manifest declares a sandbox "
        "(run confined with bubblewrap); a declared grant not approved here is refused by "
        "`srt validate`.",
    )
    admissions: bool = Field(
        False,
        description="Run the module under the node agent, which admits the units that name "
        "this service in `uses:` (capabilities, pool tokens, memory): an on_demand service "
        "starts on the first admission and stops after its idle_timeout_s with none. Ready "
        "once the agent answers on its control socket. The whole bundle is loaded (its "
        "`always` services are kept up too).",
    )
    mem_budget_gb: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="With `admissions`: the node's memory budget for admissions (the host's "
        "real memory bounds it too).",
    )
    ready_timeout_seconds: float | None = Field(
        None,
        gt=0,
        description="How long srt waits for the protocol's ready. Default: what the agent may "
        "need for its first try, from the manifest (fingerprint, start and ready timeouts).",
    )


class OarbankKind(ServiceKind):
    name: ClassVar[str] = "oarbank"
    command_summary: ClassVar[str] = "srt's oarbank agent, driving the module's protocol"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": "Not a kind of the specification: service protocol 1"
        " (`service-protocol-1.md`), run under srt's agent.",
    }
    summary: ClassVar[str] = "A service of a protocol-1 module, run under srt's oarbank agent."
    readiness_summary: ClassVar[str] = "the protocol's ready op"
    Options: ClassVar[type[OarbankOptions]] = OarbankOptions
    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    forbids_command: ClassVar[bool] = True
    #: the protocol's stop may take 120 s, then destroy --force 60 s, then reaping (validate
    #: warns when a manifest's stop timeout needs more)
    default_stop_grace: ClassVar[float] = 190.0
    #: what the readiness below uses, so ``srt kinds oarbank`` says what dry-run shows
    readiness_timeout_summary: ClassVar[str] = (
        "options.ready_timeout_seconds, else the manifest's fingerprint + start + ready"
        f" timeouts + {READY_MARGIN_S:g} s (600 s when the bundle cannot be read)"
    )
    default_readiness_interval: ClassVar[float] = 1.0
    accepts_uses: ClassVar[bool] = True

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        from oarbank_protocol.execution.bundle import load_bundle

        out: list[Problem] = []
        for op, seconds in options.timeouts.items():
            if op not in OPS:
                out.append(
                    Problem(("options", "timeouts", op), f"is not an operation ({', '.join(OPS)})")
                )
            elif not seconds > 0:
                out.append(Problem(("options", "timeouts", op), "must be > 0 seconds"))
        path = Path(options.bundle)
        if not path.is_absolute():
            out.append(
                Problem(("options", "bundle"), "must be an absolute path (every node must find it)")
            )
            return out
        try:
            bundle = load_bundle(path)
            manifest = bundle.manifest.service(options.service)
        except Exception as exc:
            out.append(Problem(("options",), f"cannot use module bundle {options.bundle}: {exc}"))
            return out
        from oarbank_protocol.errors import SandboxRefused
        from oarbank_protocol.execution.sandbox import resolve

        try:
            resolve(
                bundle.name,
                bundle.manifest.sandbox,
                options.sandbox.site(),
                bundle_root=bundle.root,
                data_dir=Path("/nonexistent"),
                tools=options.tools,
            )
        except SandboxRefused as exc:
            out.append(Problem(("options", "sandbox"), str(exc)))
        if options.timeouts and options.admissions:
            out.append(
                Problem(
                    ("options", "timeouts"),
                    "applies only without admissions (the node agent keeps the manifest's)",
                )
            )
        if options.mem_budget_gb is not None and not options.admissions:
            out.append(Problem(("options", "mem_budget_gb"), "applies only with admissions: true"))
        stop = options.timeouts.get("stop") or manifest.op_timeout("stop") or DEFAULT_STOP_S
        needed = stop + ESCALATION_S + TEARDOWN_MARGIN_S
        grace = spec.stop_grace_seconds
        grace = self.default_stop_grace if grace is None else grace
        if grace < needed:
            out.append(
                Problem(
                    ("stop_grace_seconds",),
                    f"{grace:g} s is shorter than the module's stop ({stop:g} s) plus destroy "
                    f"--force ({ESCALATION_S:g} s) and reaping: srt may kill the agent before "
                    f"the module has stopped; set stop_grace_seconds: {needed:g}",
                    warning=True,
                )
            )
        return out

    def validate_use(
        self, spec: ServiceSpec, options: Any, use: UseSpec, recipe: Recipe
    ) -> Iterable[Problem]:
        from oarbank_protocol.execution.bundle import load_bundle

        if not options.admissions:
            return [
                Problem(
                    ("service",),
                    f"services[{spec.name}] takes no admissions: set its options.admissions:"
                    " true (its module then runs under the node agent)",
                )
            ]
        try:
            bundle = load_bundle(Path(options.bundle))
        except Exception:
            return []  # the service's own entry says why
        manifest = bundle.manifest
        out: list[Problem] = []
        if use.capability is not None:
            module, _, name = use.capability.rpartition("/")
            known = [s.name for s in manifest.services] + [p.name for p in manifest.probes]
            if module not in ("", bundle.name) or name not in known:
                out.append(
                    Problem(
                        ("capability",),
                        f"module {bundle.name} has no service or probe {use.capability!r}"
                        f" (it has: {', '.join(known) or 'none'})",
                    )
                )
        if use.pool is not None:
            module, _, name = use.pool.rpartition("/")
            pools = sorted({p for s in manifest.services for p in s.pools})
            if module not in ("", bundle.name) or name not in pools:
                out.append(
                    Problem(
                        ("pool",),
                        f"module {bundle.name} declares no pool {use.pool!r}"
                        f" (its services declare: {', '.join(pools) or 'none'})",
                    )
                )
        return out

    def use_command(
        self,
        spec: ServiceSpec,
        options: Any,
        uses: Sequence[UseSpec],
        provider: PlannedInstance,
        user: PlannedInstance,
    ) -> list[str]:
        from oarbank_protocol.execution.bundle import load_bundle
        from srt_services.extend import EXIT_REASON_FILE

        module = load_bundle(Path(options.bundle)).name
        needs: list[str] = []
        pools: dict[str, int] = {}
        mem_gb = 0.0
        for use in uses:
            need = _qualified(module, use.capability or options.service)
            if need not in needs:
                needs.append(need)
            if use.pool is not None:
                pool = _qualified(module, use.pool)
                pools[pool] = pools.get(pool, 0) + (use.tokens or 1)
            mem_gb += use.mem_gb or 0.0
        argv = [sys.executable, "-m", "srt_oarbank.run", "--socket", agent_socket(provider)]
        for need in needs:
            argv += ["--need", need]
        for pool, tokens in pools.items():
            argv += ["--pool", f"{pool}={tokens}"]
        if mem_gb:
            argv += ["--mem-gb", f"{mem_gb:g}"]
        argv += ["--reason-file", f"{user.work_dir}/{EXIT_REASON_FILE}", "--", *user.argv]
        return argv

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        if options.admissions:
            return node_agent_command(options)
        argv = [
            sys.executable,
            "-m",
            "srt_oarbank.agent",
            "--bundle",
            options.bundle,
            "--service",
            options.service,
            "--node-id",
            options.node_id,
            "--data",
            "{work_dir}/data",
            "--state",
            "{work_dir}/agent-state.json",
            "--status-file",
            "{work_dir}/status.json",
        ]
        for name in ("settings", "tools", "limits"):
            if getattr(options, name):
                argv += [f"--{name}", f"{{work_dir}}/{name}.json"]
        # Reaping while the job runs: the agent keeps the job's live attempts in this file
        # and reaps by it; the job's end is the end of all its attempts.
        argv += [
            "--live-attempts",
            "{work_dir}/live-attempts.json",
            "--reap-period-s",
            f"{options.reap_period_seconds:g}",
            "--teardown-all-gone",
        ]
        for op, seconds in sorted(options.timeouts.items()):
            argv += ["--timeout", f"{op}={seconds:g}"]
        argv += options.sandbox.agent_args()
        # What the module starts carries srt's job cookie, so srt still finds it at job end
        # (the protocol's stop and reaping come first; this is the net under them).
        for name in (processes.COOKIE_VAR, processes.INSTANCE_VAR):
            argv += ["--inherit-env", name]
        return argv

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return {
            f"{name}.json": literal_json(getattr(options, name))
            for name in ("settings", "tools", "limits")
            if getattr(options, name)
        }

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        if options.admissions:
            return DefaultProbe(
                "oarbank-agent",
                {"socket": SOCKET},
                timeout=options.ready_timeout_seconds or AGENT_READY_S,
            )
        return DefaultProbe(
            "oarbank-ready",
            {
                "bundle": options.bundle,
                "service": options.service,
                "node_id": options.node_id,
                "data_dir": "{work_dir}/data",
                "timeouts": dict(options.timeouts),
                "status_file": "{work_dir}/status.json",
                "agent_data": True,
                "tools": dict(options.tools),
                "sandbox": options.sandbox.model_dump(mode="json"),
            },
            timeout=options.ready_timeout_seconds or default_ready_timeout(options),
        )


#: The node agent's control socket: node-local and short (a Unix socket path has 107 bytes).
SOCKET = "{local_dir}/agent.sock"
#: The node agent is ready once it loaded its bundles, adopted what runs and listens: it
#: starts nothing for an on_demand service before an admission asks.
AGENT_READY_S = 120.0


def node_agent_command(options: Any) -> list[str]:
    """The node agent over the service's bundle, answering admissions on :data:`SOCKET`."""
    from oarbank_protocol.execution.bundle import load_bundle

    argv = [
        sys.executable,
        "-m",
        "srt_oarbank.node_agent",
        "--bundle",
        options.bundle,
        "--node-id",
        options.node_id,
        "--data-root",
        "{work_dir}/data",
        "--state-dir",
        "{work_dir}/state",
        "--socket",
        SOCKET,
    ]
    try:
        module = load_bundle(Path(options.bundle)).name
    except Exception:
        module = None  # refused by validate; a dry run of another machine's recipe
    for name in ("settings", "tools", "limits"):
        if getattr(options, name) and module is not None:
            argv += [f"--{name}", f"{module}={{work_dir}}/{name}.json"]
    argv += [
        "--live-attempts",
        "{work_dir}/live-attempts.json",
        "--reap-period-s",
        f"{options.reap_period_seconds:g}",
    ]
    if options.mem_budget_gb is not None:
        argv += ["--mem-budget-gb", f"{options.mem_budget_gb:g}"]
    argv += options.sandbox.agent_args()
    for name in (processes.COOKIE_VAR, processes.INSTANCE_VAR):
        argv += ["--inherit-env", name]
    return argv


def agent_socket(provider: PlannedInstance) -> str:
    """The control socket in a planned node agent's argv (rendered, so final)."""
    argv = provider.argv
    return argv[argv.index("--socket") + 1]


def _qualified(module: str, name: str) -> str:
    return name if "/" in name else f"{module}/{name}"


def default_ready_timeout(options: Any) -> float:
    """How long the agent may need before its first ``ready`` can say yes.

    It fingerprints (to adopt rather than start twice), starts, then polls ``ready`` until the
    manifest's ``ready_timeout_s``: srt's readiness must outlast all three, or srt would give
    up on a module that is within its own limits. Unknown bundle (refused by ``validate``
    anyway): the old fixed 600 s.
    """
    from oarbank_protocol.execution.bundle import load_bundle
    from oarbank_protocol.execution.executor import DEFAULT_TIMEOUTS

    try:
        manifest = load_bundle(Path(options.bundle)).manifest.service(options.service)
    except Exception:
        return 600.0
    fingerprint = options.timeouts.get("fingerprint") or manifest.op_timeout("fingerprint")
    start = options.timeouts.get("start") or manifest.start_timeout_s
    return float(
        (fingerprint or DEFAULT_TIMEOUTS["fingerprint"])
        + start
        + manifest.ready_timeout_s
        + READY_MARGIN_S
    )


def literal_json(value: Any) -> str:
    """``value`` as JSON text that srt's placeholder rendering leaves exactly as it is.

    srt renders every string a kind returns (``{node}``, ``{{x}}`` for a literal ``{x}``), but
    the settings are the module's data and must reach it unchanged, placeholders and all. A
    placeholder can only occur inside a JSON string (a structural brace is followed by a
    quote or a brace), so braces there are written as the JSON escapes ``\\u007b`` and
    ``\\u007d``: any JSON reader decodes the same values, and srt finds nothing to render.
    """
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("{", "\\u007b").replace("}", "\\u007d")
    if isinstance(value, dict):
        items = (f"{literal_json(str(k))}: {literal_json(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal_json(v) for v in value) + "]"
    return json.dumps(value)
