"""The ``srtctl`` recipe format: an srtctl recipe file read as it is, one job per variant.

srt recognises an srtctl recipe by its shape (no ``schema:``, and srtctl's ``model`` +
``resources``, or an override file's ``base:``/``override_*``/``zip_override_*``, or a
``sweep:`` file), or by ``format: srtctl``. Each variant is validated as srtctl validates it
(after the cluster config's aliases and defaults), then translated; every problem points at
the key of the ORIGINAL file it came from (the override section that set it, else ``base``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from srt_services.extend import FormatProblems, Problem, RecipeFormat, Translated, Variant

from srt_srtctl.cluster import (
    CLUSTER_FILE,
    ENV_VAR,
    ClusterConfig,
    find_cluster_config,
    load_cluster_config,
)
from srt_srtctl.errors import ClusterConfigError, KeyPath, RecipeError
from srt_srtctl.loader import load_config_dict
from srt_srtctl.schema import SrtConfig
from srt_srtctl.sweeps import OVERRIDE, ZIP_OVERRIDE, expand_variants, select_variants
from srt_srtctl.sweeps import Variant as SweepVariant
from srt_srtctl.translate import BENCHMARK_TYPES, translate_config

#: Top-level keys only srtctl recipes have (with ``model`` + ``resources``, the shape).
SRTCTL_KEYS = frozenset({"model", "resources", "backend", "slurm", "benchmark", "frontend"})


def looks_like_srtctl(data: Mapping[str, Any]) -> bool:
    if "schema" in data:
        return False
    if "base" in data and isinstance(data["base"], Mapping):
        return True
    if any(isinstance(k, str) and k.startswith((OVERRIDE, ZIP_OVERRIDE)) for k in data):
        return True
    return isinstance(data.get("model"), Mapping) and isinstance(data.get("resources"), Mapping)


def cluster_config_for(source: str, settings: Mapping[str, Any]) -> ClusterConfig:
    """The site's ``[formats.srtctl] cluster_config`` first, else where srtctl looks:
    ``$SRTSLURM_CONFIG``, then ``srtslurm.yaml`` in the working directory and the two above
    it, then beside the recipe and the two directories above it. An invalid file is an error
    (srtctl ignores it with a warning)."""
    configured = settings.get("cluster_config")
    path: Path | None
    if configured is not None:
        if not isinstance(configured, str):
            raise FormatProblems(
                [Problem((), "site setting [formats.srtctl] cluster_config must be a path")]
            )
        path = Path(configured)
        if not path.is_file():
            raise FormatProblems(
                [Problem((), f"[formats.srtctl] cluster_config {configured}: no such file")]
            )
    else:
        path = find_cluster_config(Path.cwd())
        if path is None and source not in ("<stdin>", "-"):
            path = find_cluster_config(Path(source).resolve().parent, environ={})
        if path is not None and not path.is_file():
            raise FormatProblems([Problem((), f"{ENV_VAR}={path}: no such {CLUSTER_FILE}")])
    try:
        return load_cluster_config(path)
    except ClusterConfigError as exc:
        where = os.fspath(path) if path is not None else CLUSTER_FILE
        raise FormatProblems(
            [Problem((), f"invalid cluster config {where}: {p}") for p in exc.problems]
        ) from None
    except (OSError, ValueError) as exc:
        raise FormatProblems([Problem((), f"cluster config {path}: {exc}")]) from None


def _has(tree: Any, path: KeyPath) -> bool:
    for part in path:
        in_map = isinstance(tree, Mapping) and part in tree
        in_list = isinstance(tree, list) and isinstance(part, int) and 0 <= part < len(tree)
        if in_map or in_list:
            tree = tree[part]
        else:
            return False
    return True


def _deepest(tree: Any, path: KeyPath) -> KeyPath:
    """The longest prefix of ``path`` present in ``tree``."""
    for n in range(len(path), 0, -1):
        if _has(tree, path[:n]):
            return path[:n]
    return ()


def original_path(data: Mapping[str, Any], selector: str | None, path: KeyPath) -> KeyPath:
    """Where the key ``path`` of a variant is written in the original file: the override
    section that set it (a zip list's own item), else ``base``, else the plain document."""
    if selector is None or selector == "base" or "sweep" in data:
        if selector == "base" or (selector is not None and "base" in data):
            return ("base", *_deepest(data.get("base"), path))
        return _deepest(data, path)
    section_key = selector.split("[", 1)[0]
    section = data.get(section_key)
    found = _deepest(section, path)
    if found and (len(found) == len(path) or not _has(data.get("base"), path[:1])):
        out: KeyPath = (section_key, *found)
        if "[" in selector and _has(section, found):
            leaf: Any = section
            for part in found:
                leaf = leaf[part]
            if isinstance(leaf, list) and len(leaf) > 1:
                out = (*out, int(selector.split("[", 1)[1].rstrip("]")))
        return out
    base_found = _deepest(data.get("base"), path)
    if base_found or not found:
        return ("base", *base_found)
    return (section_key, *found)


def located(path: KeyPath, message: str, where: Callable[[KeyPath], KeyPath]) -> Problem:
    """A problem at the original key; a key the file does not hold (a missing one) is
    named in the message, located at its nearest written ancestor."""
    at = where(path)
    if path and path[-1] not in at[-2:]:
        message = f"{'.'.join(str(p) for p in path)}: {message}"
    return Problem(at, message)


def benchmark_problems(config: SrtConfig, where: Callable[[KeyPath], KeyPath]) -> list[Problem]:
    """srtctl accepts any benchmark type and fails once the workers are up; srt refuses it."""
    problems = []
    if config.benchmark.type not in BENCHMARK_TYPES:
        known = ", ".join(sorted(BENCHMARK_TYPES))
        problems.append(
            Problem(
                where(("benchmark", "type")),
                f"unknown benchmark type {config.benchmark.type!r} (srtctl's: {known});"
                " srtctl would fail only after the workers started",
            )
        )
    if config.benchmark.type == "custom" and not config.benchmark.command:
        problems.append(Problem(where(("benchmark",)), "benchmark type custom needs `command`"))
    return problems


def unsupported_problems(config: SrtConfig, where: Callable[[KeyPath], KeyPath]) -> list[Problem]:
    """srtctl settings srt cannot honour yet: refused at their line rather than run as a
    different job."""
    problems = []
    if config.frontend.dedicated_node:
        problems.append(
            Problem(
                where(("frontend", "dedicated_node")),
                "a frontend on a node of its own is not supported by srt yet: the frontend"
                " runs on the head worker node (remove it, or use infra.etcd_nats_dedicated_node"
                " / benchmark.client_dedicated_node)",
            )
        )
    het = config.het_jobs or getattr(config.backend, "het_jobs", False)
    if het:
        problems.append(
            Problem(
                where(("het_jobs",) if config.het_jobs else ("backend", "het_jobs")),
                "heterogeneous Slurm jobs are not in srt (docs/differences.md, Not in srt)",
            )
        )
    return problems


class SrtctlFormat(RecipeFormat):
    name: ClassVar[str] = "srtctl"
    summary: ClassVar[str] = (
        "NVIDIA srtctl recipes as written (override and zip sweeps, srtslurm.yaml aliases):"
        " one srt job per variant"
    )

    def recognises(self, data: Mapping[str, Any]) -> bool:
        return looks_like_srtctl(data)

    def _expand(self, data: Mapping[str, Any]) -> list[SweepVariant]:
        try:
            return expand_variants(data)
        except RecipeError as exc:
            raise FormatProblems([Problem(p.path, p.message) for p in exc.problems]) from None

    def variants(
        self, data: Mapping[str, Any], source: str, settings: Mapping[str, Any]
    ) -> list[Variant]:
        return [
            Variant(v.selector or "plain", str(v.config.get("name", "")))
            for v in self._expand(data)
        ]

    def default_variants(self, variants: list[Variant]) -> list[Variant]:
        """srtctl runs every variant but ``base``, in selector order."""
        if len(variants) == 1:
            return variants
        keep = {v.selector for v in self._select(variants, None)}
        return [v for v in self._ordered(variants) if v.selector in keep]

    def select(self, variants: list[Variant], selector: str) -> list[Variant]:
        """srtctl's ``-f FILE:SEL``: a selector, a group (``zip_override_tp``) or a glob."""
        return self._select(variants, selector)

    @staticmethod
    def _ordered(variants: list[Variant]) -> list[Variant]:
        fake = [SweepVariant(v.selector, None, {}) for v in variants]
        order = [s.selector for s in select_variants(fake, "*")] if len(fake) > 1 else []
        by = {v.selector: v for v in variants}
        return [by[s] for s in order if s in by] or variants

    @staticmethod
    def _select(variants: list[Variant], selector: str | None) -> list[Variant]:
        if len(variants) == 1 and variants[0].selector == "plain":
            return variants if selector in (None, "plain", "base") else []
        fake = [SweepVariant(v.selector, None, {}) for v in variants]
        try:
            chosen = select_variants(fake, selector)
        except RecipeError:
            return []
        by = {v.selector: v for v in variants}
        return [by[c.selector] for c in chosen if c.selector in by]

    def translate(
        self,
        data: Mapping[str, Any],
        variant: Variant,
        source: str,
        settings: Mapping[str, Any],
    ) -> Translated:
        selector = None if variant.selector == "plain" else variant.selector
        found = [v for v in self._expand(data) if v.selector == selector]
        if not found:
            raise FormatProblems([Problem((), f"no variant {variant.selector}")])
        raw = found[0].config
        cluster = cluster_config_for(source, settings)

        def where(path: KeyPath) -> KeyPath:
            return original_path(data, selector, path)

        try:
            config = load_config_dict(raw, cluster)
        except RecipeError as exc:
            raise FormatProblems(
                [located(p.path, p.message, where) for p in exc.problems]
            ) from None
        problems = benchmark_problems(config, where) + unsupported_problems(config, where)
        if problems:
            raise FormatProblems(problems)
        containers = settings.get("containers", True)
        if not isinstance(containers, bool):
            raise FormatProblems(
                [Problem((), "site setting [formats.srtctl] containers must be true or false")]
            )
        doc, origins = translate_config(config, raw, cluster, containers)

        def origin(path: tuple[str | int, ...]) -> tuple[str | int, ...]:
            for n in range(len(path), 0, -1):
                hit = origins.get(tuple(path[:n]))
                if hit is not None:
                    return where(hit)
            return ()

        notes = []
        if config.frontend.type == "dynamo" and not config.infra.etcd_nats_dedicated_node:
            notes.append(
                "etcd (and NATS for a NATS plane) run as srt services, each its own process"
                " (srtctl: one setup_head.py running both)"
            )
        return Translated(doc, origin, notes=notes, resolved=dict(raw))
