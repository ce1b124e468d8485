"""What one launch is: argv, environment, container, srun shape, and (for workers) its record.

Plain data, so that srt can turn it into its own service specs and the tests can compare it
field by field with what srtctl builds.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from srt_srtctl.topology import WorkerProcess

_PLACEHOLDER = re.compile(r"<[^<>\s]*(?: [^<>]*)?>")


def shell_quote(text: str) -> str:
    """shlex.quote, except that run-time placeholders (`<ip:node0>`) count as safe text.

    The oracle quotes the real values and renders placeholders afterwards, so `<LOG_DIR>/x`
    stays unquoted in its command lines; real values are plain paths and IPs.
    """
    bare = _PLACEHOLDER.sub("x", text)
    if bare and shlex.quote(bare) == bare:
        return text
    return shlex.quote(text)


@dataclass
class SrunSpec:
    nodes: int = 1
    ntasks: int = 1
    nodelist: list[str] = field(default_factory=list)
    output: str = ""
    mpi: str | None = None
    oversubscribe: bool = False
    cpu_bind: str | None = None
    export_env: dict[str, str] = field(default_factory=dict)
    options: dict[str, str | None] = field(default_factory=dict)
    het_group: int | None = None
    use_bash_wrapper: bool = True


@dataclass
class WorkerRecord:
    role: str
    index: int
    node: str
    node_rank: int
    gpu_indices: list[int]
    is_leader: bool
    sys_port: int
    http_port: int
    kv_events_port: int
    nixl_port: int
    bootstrap_port: int | None
    dp_rpc_port: int | None
    endpoint_nodes: list[str]
    launch: str
    """`per_process` (one srun per node) or `per_endpoint` (TRTLLM: one MPI srun)."""

    @classmethod
    def of(cls, proc: WorkerProcess, launch: str) -> WorkerRecord:
        return cls(
            role=proc.role,
            index=proc.index,
            node=proc.node,
            node_rank=proc.node_rank,
            gpu_indices=list(proc.gpu_indices),
            is_leader=proc.is_leader,
            sys_port=proc.sys_port,
            http_port=proc.http_port,
            kv_events_port=proc.kv_events_port,
            nixl_port=proc.nixl_port,
            bootstrap_port=proc.bootstrap_port,
            dp_rpc_port=proc.dp_rpc_port,
            endpoint_nodes=list(proc.endpoint_nodes),
            launch=launch,
        )


@dataclass
class ProcessSpec:
    stage: str
    """infra, mooncake, workers, frontend or benchmark (launch order)."""
    name: str
    nodes: list[str]
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """In export order: later layers overwrite a key in place (a Python dict update)."""
    env_sources: dict[str, str] = field(default_factory=dict)
    env_unset: list[str] = field(default_factory=list)
    bash_preamble: str | None = None
    container_image: str | None = None
    container_mounts: dict[str, str] = field(default_factory=dict)
    """container path -> host path."""
    srun: SrunSpec = field(default_factory=SrunSpec)
    worker: WorkerRecord | None = None
    shell_argv: bool = False
    """argv is `bash -c <line>` run as is, without srtctl's bash wrapper (nginx)."""

    def command_line(self) -> str:
        """The text srtctl runs under `bash -c`."""
        if self.shell_argv:
            return self.argv[-1]
        parts = [f"export {k}={shell_quote(v)}" for k, v in self.env.items()]
        parts.extend(f"unset -- {k}" for k in self.env_unset)
        if self.bash_preamble:
            parts.append(self.bash_preamble)
        parts.append(" ".join(map(shell_quote, self.argv)))
        return " && ".join(parts)
