"""Engine ``sglang``: SGLang's own router (``sglang_router.launch_router``) in front of
``sglang.launch_server`` workers, as srtctl builds them for ``frontend.type: sglang``.

The router is given every worker's address (``--worker-urls``, or ``--prefill URL
BOOTSTRAP`` / ``--decode URL`` disaggregated); no etcd or NATS is involved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    SGLANG_SERVER_FLAGS,
    Engine,
    EngineProcess,
    InstanceContext,
    Problem,
    Recipe,
    WorkerProcess,
    WorkerSlots,
    backend_flags,
    config_value,
    sglang_kv_events_config,
    sglang_server_flags,
    worker_slots,
)

from srt_direct.common import (
    MODE_OF_ROLE,
    CommonOptions,
    disaggregated,
    http_probe,
    interpreter,
    leaders,
    model_problems,
    owned_problems,
    role_config,
    served_model_name,
)

#: flags the engine sets; a recipe's copy in config is dropped (with a warning)
OWNED = SGLANG_SERVER_FLAGS

KvEvents = bool | dict[str, Any]


class SGLangOptions(CommonOptions):
    """Settings of the ``sglang`` engine (``engine.options``)."""

    kv_events: bool | dict[str, KvEvents] = Field(
        False,
        description="`--kv-events-config` on a ZMQ publisher at kv_events + k: `true` for every"
        " mode, or per mode (`prefill`, `decode`, `aggregated`); a mapping is merged in.",
    )


def _kv_events(options: SGLangOptions, mode: str, port: int) -> dict[str, Any] | None:
    setting: Any = options.kv_events
    if isinstance(setting, dict):
        setting = setting.get(mode, False)
    return sglang_kv_events_config(setting, port)


def _scheme(recipe: Recipe, role: str) -> str:
    return "grpc" if config_value(role_config(recipe, role), "grpc-mode") is True else "http"


class SGLangEngine(Engine):
    name: ClassVar[str] = "sglang"
    summary: ClassVar[str] = (
        "SGLang's router in front of sglang.launch_server workers (no Dynamo), as srtctl"
        " builds them"
    )
    backends: ClassVar[frozenset[str]] = frozenset({"sglang"})
    Options: ClassVar[type[SGLangOptions]] = SGLangOptions

    def __init__(self) -> None:
        self._for: Sequence[WorkerProcess] | None = None
        self._table: list[WorkerSlots] = []

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        yield from model_problems(recipe, "srt-direct's sglang engine")
        yield from owned_problems(recipe, OWNED, "srt-direct's sglang engine")

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        opts: SGLangOptions = options
        if self._for is not processes:
            self._table, self._for = worker_slots(processes, opts.ports), processes
        s = self._table[process.process_index]
        role = process.worker.role
        python = interpreter(opts.python, recipe, role)
        argv = [python, "-m", "sglang.launch_server"]
        argv += sglang_server_flags(
            process, s, recipe.engine.model or "", served_model_name(recipe), opts.ports.dist_init
        )
        kv = _kv_events(opts, MODE_OF_ROLE[role], s.kv_events_port)
        if kv is not None:
            argv += ["--kv-events-config", json.dumps(kv)]
        argv += backend_flags(role_config(recipe, role), drop=OWNED)
        ports = [p for p in (s.http_port, s.nccl_port) if p is not None]
        if process.leader and s.bootstrap_port is not None:
            ports.append(s.bootstrap_port)
        return EngineProcess(
            argv=argv,
            env={"HEAD_NODE_IP": "{head_ip}"},
            readiness=http_probe(s.http_port, "/health", opts.readiness_timeout_seconds)
            if process.leader and s.http_port is not None
            else None,
            ports=tuple(ports),
        )

    def frontend(
        self, recipe: Recipe, options: Any, ctx: InstanceContext, port: int
    ) -> EngineProcess:
        opts: SGLangOptions = options
        argv = [_router_python(opts, recipe), "-m", "sglang_router.launch_router"]
        found = list(leaders(ctx.layout, opts.ports))
        if disaggregated(recipe):
            argv.append("--pd-disaggregation")
            for proc, s in found:
                if proc.worker.role == "prefill":
                    url = f"{_scheme(recipe, 'prefill')}://{proc.node.ip}:{s.http_port}"
                    argv += ["--prefill", url, str(s.bootstrap_port)]
            for proc, s in found:
                if proc.worker.role == "decode":
                    argv += [
                        "--decode",
                        f"{_scheme(recipe, 'decode')}://{proc.node.ip}:{s.http_port}",
                    ]
        else:
            argv.append("--worker-urls")
            argv += [f"{_scheme(recipe, 'agg')}://{p.node.ip}:{s.http_port}" for p, s in found]
        argv += ["--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
        return EngineProcess(
            argv=argv,
            readiness=http_probe(port, "/health", opts.readiness_timeout_seconds),
            ports=(port,),
        )


def _router_python(opts: SGLangOptions, recipe: Recipe) -> str:
    """srtctl runs the router as ``python -m``; outside a container, srt's interpreter."""
    found = interpreter(opts.python, recipe, None)
    return "python" if found == "python3" and not opts.python else found
