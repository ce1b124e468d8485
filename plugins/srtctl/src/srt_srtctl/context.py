"""Everything a builder needs about one job, computed once.

Builders for backends, frontends and benchmarks read the same derived facts (the model argument
workers get, the served model name, the job container, which deviations from srtctl are on);
computing them here keeps each builder small and keeps the facts consistent between them.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from srt_srtctl.cluster import EMPTY, ClusterConfig
from srt_srtctl.deviations import Fidelity
from srt_srtctl.flags import lookup
from srt_srtctl.schema import SrtConfig
from srt_srtctl.topology import Topology
from srt_srtctl.values import RuntimeValues

HF_PREFIX = "hf:"
CONTAINER_MODEL_PATH = "/model"


@dataclass
class BuildContext:
    config: SrtConfig
    topology: Topology
    values: RuntimeValues
    fidelity: Fidelity
    cluster: ClusterConfig = EMPTY
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    # --- model ---------------------------------------------------------------------------------

    @property
    def is_hf_model(self) -> bool:
        return self.config.model.path.startswith(HF_PREFIX)

    @property
    def hf_id(self) -> str:
        return self.config.model.path[len(HF_PREFIX) :]

    @property
    def model_arg(self) -> str:
        """What workers get as the model: the HF id, or the container mount point."""
        return self.hf_id if self.is_hf_model else CONTAINER_MODEL_PATH

    @property
    def model_basename(self) -> str:
        path = self.hf_id if self.is_hf_model else self.config.model.path
        return posixpath.basename(path.rstrip("/")) or path

    def mode_config(self, mode: str) -> dict[str, Any]:
        backend = self.config.backend
        section = getattr(backend, f"{backend.type}_config", None)
        if section is None:
            return {}
        return dict(getattr(section, mode) or {})

    @property
    def served_model_name(self) -> str:
        """First served-model-name in prefill, aggregated, decode (sglang/vllm), else basename."""
        if self.config.backend_type in ("sglang", "vllm"):
            for mode in ("prefill", "aggregated", "decode"):
                name = lookup(self.mode_config(mode), "served-model-name")
                if name:
                    return str(name)
        return self.model_basename

    # --- containers and job shape --------------------------------------------------------------

    @property
    def container(self) -> str:
        image = self.config.model.container
        if image.startswith(("/", "./")):
            return image
        # srtctl round-trips the image through pathlib.Path, which folds `//` into `/`
        while "//" in image:
            image = image.replace("//", "/")
        return image

    @property
    def frontend_type(self) -> str:
        return self.config.frontend.type

    @property
    def installs_dynamo(self) -> bool:
        return self.frontend_type == "dynamo" and self.config.dynamo.install

    @property
    def starts_infra(self) -> bool:
        return self.frontend_type not in ("trtllm_serve", "vllm")

    def base_mounts(self) -> dict[str, str]:
        """Container path -> host path, for every container srun (doc §12)."""
        v = self.values
        pairs = [("/logs", v.log_dir)]
        if not self.is_hf_model:
            pairs.append(("/model", v.model_host_path))
        pairs.append(("/configs", f"{v.srtctl_source}/configs"))
        pairs.append(("/srtctl-runtime", f"{v.srtctl_pkg}/runtime_scripts"))
        pairs.append(("/srtctl-benchmarks", f"{v.srtctl_pkg}/benchmarks/scripts"))
        pairs += [(c, h) for h, c in self.cluster.default_mounts.items()]
        for entry in self.config.extra_mount or []:
            host, _, container = entry.partition(":")
            pairs.append((container or host, host))
        pairs += list((self.config.container_mounts or {}).items())
        if self.fidelity.fixed("mounts-keyed-by-host"):
            return dict(pairs)
        # srtctl keys its mount table by host path: a second mount of one host dir replaces the
        # first (deviation mounts-keyed-by-host)
        by_host: dict[str, str] = {}
        for container, host in pairs:
            by_host[host] = container
        return {container: host for host, container in by_host.items()}
