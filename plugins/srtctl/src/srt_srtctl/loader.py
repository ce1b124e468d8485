"""From a recipe file to validated configs, one per variant (doc §2, §14)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from srt_srtctl.cluster import EMPTY, ClusterConfig, apply_cluster_defaults
from srt_srtctl.errors import Problem, RecipeError
from srt_srtctl.schema import SrtConfig, validate_config
from srt_srtctl.sweeps import Variant, expand_variants, select_variants

ENV_SECTIONS = ("prefill_environment", "decode_environment", "aggregated_environment")


@dataclass(frozen=True)
class LoadedVariant:
    variant: Variant
    config: SrtConfig


def expand_observability(data: Mapping[str, Any]) -> dict[str, Any]:
    """`observability.enabled` adds logging/tracing env with setdefault semantics (doc §13)."""
    out = copy.deepcopy(dict(data))
    obs = out.get("observability")
    if not isinstance(obs, Mapping) or not obs.get("enabled"):
        return out
    debug = {"DYN_LOGGING_SPAN_EVENTS": "true", "DYN_LOGGING_JSONL": "true", "DYN_LOG": "debug"}
    backend = out.setdefault("backend", {})
    if isinstance(backend, dict):
        for section in ENV_SECTIONS:
            env = backend.setdefault(section, {}) or {}
            if not isinstance(env, dict):
                continue  # the schema refuses it, at its line
            for k, v in debug.items():
                env.setdefault(k, v)
            backend[section] = env
    frontend = out.setdefault("frontend", {})
    env = frontend.setdefault("env", {}) or {} if isinstance(frontend, dict) else None
    if isinstance(frontend, dict) and isinstance(env, dict):
        for k, v in {
            **debug,
            "DYN_REQUEST_TRACE": "1",
            "DYN_REQUEST_TRACE_FILE_PATH": "/logs/dynamo-request-trace",
        }.items():
            env.setdefault(k, v)
        frontend["env"] = env
    return out


def load_config_dict(data: Mapping[str, Any], cluster: ClusterConfig = EMPTY) -> SrtConfig:
    """One plain recipe dict (a variant) to a fully defaulted config."""
    body = {k: v for k, v in data.items() if k != "lock"}
    return validate_config(expand_observability(apply_cluster_defaults(body, cluster)))


def load_variants(
    data: Any, selector: str | None = None, cluster: ClusterConfig = EMPTY
) -> list[LoadedVariant]:
    """Every selected variant, validated; problems of all variants are reported together."""
    if not isinstance(data, Mapping):
        raise RecipeError([Problem((), "a recipe must be a mapping")])
    variants = select_variants(expand_variants(data), selector)
    loaded: list[LoadedVariant] = []
    problems: list[Problem] = []
    for variant in variants:
        try:
            loaded.append(LoadedVariant(variant, load_config_dict(variant.config, cluster)))
        except RecipeError as exc:
            prefix: tuple[str | int, ...] = ()
            if variant.selector not in (None,):
                prefix = (f"<{variant.selector}>",)
            problems.extend(Problem(prefix + p.path, p.message) for p in exc.problems)
    if problems:
        raise RecipeError(problems)
    return loaded


def load_recipe_file(
    path: Path, selector: str | None = None, cluster: ClusterConfig = EMPTY
) -> list[LoadedVariant]:
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return load_variants(data, selector, cluster)
