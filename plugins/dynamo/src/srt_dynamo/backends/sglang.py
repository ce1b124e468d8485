"""``python3 -m dynamo.sglang``: SGLang behind Dynamo's frontend, srtctl's argv."""

from __future__ import annotations

import json
from typing import Any

from srt_services.extend import (
    SGLANG_SERVER_FLAGS,
    backend_flags,
    sglang_kv_events_config,
    sglang_server_flags,
)

from srt_dynamo.backends.base import Backend, dropped
from srt_dynamo.build import WorkerBuild
from srt_dynamo.environment import nsys_prefix

MODULE = "dynamo.sglang"
#: srtctl always drops these from the recipe's config; the others it duplicates (srt drops
#: them too, with a warning): the sglang server's own, and Dynamo's wrapper's
OWNED = SGLANG_SERVER_FLAGS | {"dump-config-to", "request-plane"}


def kv_events_config(b: WorkerBuild) -> dict[str, Any] | None:
    return sglang_kv_events_config(b.kv_events_setting(), b.slots.kv_events_port)


def server_flags(b: WorkerBuild) -> list[str]:
    """What sglang's server is told about its place in the job (core's rule, shared with
    srt-direct's ``sglang.launch_server`` workers)."""
    return sglang_server_flags(b.proc, b.slots, b.model, b.served, b.options.ports.dist_init)


def argv(b: WorkerBuild) -> list[str]:
    out = nsys_prefix(b.options, b.mode, b.name, b.gpus, trtllm=False, dynamo=True)
    out += [b.python, "-m", MODULE, *server_flags(b), *b.dump_config()]
    kv_events = kv_events_config(b)
    if kv_events is not None:
        out += ["--kv-events-config", json.dumps(kv_events)]
    out += b.request_plane()
    drop = dropped(OWNED, out, frozenset({"disaggregation-bootstrap-port"}))
    return out + backend_flags(b.config, drop=drop)


BACKEND = Backend(argv=argv, owned=OWNED)
