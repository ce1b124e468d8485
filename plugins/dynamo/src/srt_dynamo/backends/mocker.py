"""``python3 -m dynamo.mocker``: Dynamo's simulated engine (no GPU), srtctl's argv."""

from __future__ import annotations

from srt_services.extend import backend_flags

from srt_dynamo.backends.base import Backend
from srt_dynamo.build import WorkerBuild
from srt_dynamo.options import MockerOptions

MODULE = "dynamo.mocker"
ALWAYS = (
    "engine-type",
    "speedup-ratio",
    "data-parallel-size",
    "num-gpu-blocks-override",
    "max-num-seqs",
    "max-num-batched-tokens",
)
OPTIONAL = (
    "decode-speedup-ratio",
    "block-size",
    "num-workers",
    "startup-time",
    "kv-transfer-bandwidth",
    "kv-cache-dtype",
    "enable-prefix-caching",
    "enable-chunked-prefill",
    "preemption-mode",
)
OWNED = frozenset(
    {"model-path", "model-name", "disaggregation-mode", "bootstrap-ports", *ALWAYS, *OPTIONAL}
)


def _num(value: float) -> str:
    return str(float(value))


def knob_flags(m: MockerOptions) -> list[str]:
    """The mocker's settings: six always (srtctl's defaults), the rest only when moved."""
    argv = ["--engine-type", m.engine_type, "--speedup-ratio", _num(m.speedup_ratio)]
    if m.decode_speedup_ratio != 1.0:
        argv += ["--decode-speedup-ratio", _num(m.decode_speedup_ratio)]
    argv += ["--data-parallel-size", str(m.data_parallel_size)]
    argv += ["--num-gpu-blocks-override", str(m.num_gpu_blocks_override)]
    argv += ["--max-num-seqs", str(m.max_num_seqs)]
    argv += ["--max-num-batched-tokens", str(m.max_num_batched_tokens)]
    optional: list[tuple[str, object]] = [
        ("--block-size", m.block_size),
        ("--num-workers", m.num_workers if m.num_workers > 1 else None),
        ("--startup-time", m.startup_time),
        ("--kv-transfer-bandwidth", m.kv_transfer_bandwidth),
        ("--kv-cache-dtype", m.kv_cache_dtype),
    ]
    argv += [item for flag, value in optional if value is not None for item in (flag, str(value))]
    if not m.enable_prefix_caching:
        argv.append("--no-enable-prefix-caching")
    if not m.enable_chunked_prefill:
        argv.append("--no-enable-chunked-prefill")
    if m.preemption_mode is not None:
        argv += ["--preemption-mode", m.preemption_mode]
    return argv


def with_config(m: MockerOptions, config: dict[str, object]) -> MockerOptions:
    """A role's ``config`` naming a knob (``max-num-seqs: 128``) sets it for that role:
    srtctl passes its default and then the config's copy, and the mocker keeps the last,
    so the config's value is the one that runs. srt passes that value once."""
    update = {
        name.replace("-", "_"): config[key]
        for key in config
        if (name := key.replace("_", "-")) in (*ALWAYS, *OPTIONAL)
    }
    if not update:
        return m
    try:
        return MockerOptions.model_validate({**m.model_dump(), **update})
    except ValueError:  # a value the mocker would refuse: passed through as written
        return m


def argv(b: WorkerBuild) -> list[str]:
    m = with_config(b.options.mocker, b.config)
    out = [b.python, "-m", MODULE, "--model-path", b.model]
    if m.model_name_flag:
        out += ["--model-name", b.served]
    out += b.disaggregation()
    if b.role == "prefill" and b.slots.bootstrap_port is not None:
        out += ["--bootstrap-ports", str(b.slots.bootstrap_port)]
    out += knob_flags(m)
    return out + backend_flags(b.config, drop=OWNED)


BACKEND = Backend(argv=argv, owned=OWNED)
