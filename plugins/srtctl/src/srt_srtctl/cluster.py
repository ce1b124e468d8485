"""`srtslurm.yaml`, the per-cluster config srtctl layers under every recipe (doc §14).

Recipes name models and containers by alias (543 of 555 use `model.path: dsr1`-style names), so
a recipe means nothing without the cluster file that resolves them. srtctl ignores an invalid
file with one warning, which silently turns aliases into literal paths; srt refuses it instead
(deviation `cluster-config-invalid-ignored` in DIFFERENCES.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from srt_srtctl.errors import ClusterConfigError, Problem

CLUSTER_FILE = "srtslurm.yaml"
ENV_VAR = "SRTSLURM_CONFIG"


class ClusterHealthCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_attempts: int = 180
    interval_seconds: int = 10


class ClusterConfig(BaseModel):
    """Every key srtctl 0.3.0 accepts in srtslurm.yaml; anything else is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_account: StrictStr | None = None
    default_partition: StrictStr | None = None
    default_time_limit: StrictStr | None = None
    model_paths: dict[str, StrictStr] = Field(default_factory=dict)
    containers: dict[str, StrictStr] = Field(default_factory=dict)
    default_mounts: dict[str, StrictStr] = Field(default_factory=dict)
    network_interface: StrictStr = "eth0"
    default_sbatch_directives: dict[str, StrictStr] = Field(default_factory=dict)
    use_gpus_per_node_directive: bool = True
    use_segment_sbatch_directive: bool = True
    use_exclusive_sbatch_directive: bool = False
    use_het_jobs: bool = False
    default_health_check: ClusterHealthCheck | None = None
    nginx_raise_ulimit: bool = False
    default_bash_preamble: StrictStr | None = None
    srtctl_root: StrictStr | None = None
    output_dir: StrictStr | None = None
    reporting: dict[str, Any] | None = None
    cluster: StrictStr | dict[str, Any] | None = None
    cloud: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    gpus_per_node: int | None = None  # accepted, unused (doc §14)

    def resolve_model_path(self, path: str) -> str:
        return self.model_paths.get(path, path)

    def resolve_container(self, image: str) -> str:
        return self.containers.get(image, image)


EMPTY = ClusterConfig()


def find_cluster_config(start: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """srtctl's search order: $SRTSLURM_CONFIG, then ./, ../ and ../../ of `start`."""
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR])
    for directory in (start, start.parent, start.parent.parent):
        candidate = directory / CLUSTER_FILE
        if candidate.is_file():
            return candidate
    return None


def parse_cluster_config(data: Any) -> ClusterConfig:
    """Validate a loaded srtslurm.yaml; every problem is reported with its key path."""
    if data is None:
        return EMPTY
    if not isinstance(data, Mapping):
        raise ClusterConfigError([Problem((), "srtslurm.yaml must be a mapping")])
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(
                tuple(err["loc"]),
                "Unknown field." if err["type"] == "extra_forbidden" else err["msg"],
            )
            for err in exc.errors()
        ]
        raise ClusterConfigError(problems) from None


def load_cluster_config(path: Path | None) -> ClusterConfig:
    if path is None:
        return EMPTY
    with path.open(encoding="utf-8") as fh:
        return parse_cluster_config(yaml.safe_load(fh))


def apply_cluster_defaults(recipe: Mapping[str, Any], cluster: ClusterConfig) -> dict[str, Any]:
    """Fill the recipe from the cluster file the way srtctl does before validation (doc §14)."""
    out: dict[str, Any] = dict(recipe)
    _resolve_model(out, cluster)
    _fill_slurm(out, cluster)
    given = out.get("sbatch_directives")
    if cluster.default_sbatch_directives and (given is None or isinstance(given, Mapping)):
        directives = dict(cluster.default_sbatch_directives)
        directives.update(given or {})
        out["sbatch_directives"] = directives
    if "health_check" not in out and cluster.default_health_check is not None:
        out["health_check"] = cluster.default_health_check.model_dump()
    _resolve_frontend(out, cluster)
    bench = out.get("benchmark")
    if isinstance(bench, Mapping) and isinstance(bench.get("container_image"), str):
        out["benchmark"] = {
            **bench,
            "container_image": cluster.resolve_container(bench["container_image"]),
        }
    return out


def _resolve_model(out: dict[str, Any], cluster: ClusterConfig) -> None:
    model = out.get("model")
    if not isinstance(model, Mapping):
        return
    model = dict(model)
    if isinstance(model.get("path"), str):
        model["path"] = cluster.resolve_model_path(model["path"])
    if isinstance(model.get("container"), str):
        model["container"] = cluster.resolve_container(model["container"])
    out["model"] = model


def _fill_slurm(out: dict[str, Any], cluster: ClusterConfig) -> None:
    if out.get("slurm") is not None and not isinstance(out["slurm"], Mapping):
        return  # the schema refuses it, at its line
    slurm = dict(out.get("slurm") or {})
    defaults = {
        "account": cluster.default_account,
        "partition": cluster.default_partition,
        "time_limit": cluster.default_time_limit,
    }
    for key, default in defaults.items():
        if slurm.get(key) is None and default is not None:
            slurm[key] = default
    if slurm:
        out["slurm"] = slurm


def _resolve_frontend(out: dict[str, Any], cluster: ClusterConfig) -> None:
    frontend = out.get("frontend")
    if not isinstance(frontend, Mapping):
        return
    frontend = dict(frontend)
    if isinstance(frontend.get("nginx_container"), str):
        frontend["nginx_container"] = cluster.resolve_container(frontend["nginx_container"])
    if frontend.get("nginx_raise_ulimit") is None and cluster.nginx_raise_ulimit:
        frontend["nginx_raise_ulimit"] = True
    out["frontend"] = frontend
