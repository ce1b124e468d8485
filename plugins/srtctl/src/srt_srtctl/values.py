"""Run-time values that a pure build cannot know (IPs, job id, log dir ...).

The builders never invent these; they ask a `RuntimeValues`. The default renders the oracle's
placeholders (`<ip:node3>`, `<LOG_DIR>` ...), so a build can be compared with srtctl's own output
byte for byte; at run time srt passes the real values instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RuntimeValues:
    log_dir: str = "<LOG_DIR>"
    job_id: str = "<JOB_ID>"
    output_dir: str = "<OUTPUT_DIR>"
    output_base: str = "<OUTPUT_BASE>"
    srtctl_source: str = "<SRTCTL_SOURCE>"
    srtctl_pkg: str = "<SRTCTL_PKG>"
    model_host_path: str = "<MODEL_HOST_PATH>"
    dynamo_install: str = "<DYNAMO_INSTALL>"
    """srtctl's install script text is long and fixed; the builders refer to it by this token
    and `dynamo_install.dynamo_install_command` gives the real text."""
    eplb_shm_name: str = "moe_shared_<UUID>"
    """TRTLLM_EPLB_SHM_NAME; srtctl draws a fresh uuid4 per launch."""
    node_ips: Mapping[str, str] = field(default_factory=dict)

    def ip(self, node: str) -> str:
        return self.node_ips.get(node, f"<ip:{node}>")

    def fingerprint_capture(self, path: str) -> str:
        return f"<FINGERPRINT_CAPTURE {path}>"


DEFAULT_VALUES = RuntimeValues()


def placeholder_nodes(count: int) -> list[str]:
    """Hostnames as the oracle names them: node0..nodeN-1 in SLURM_NODELIST order."""
    return [f"node{i}" for i in range(count)]
