"""Override files (`base:` + `override_<X>:` + `zip_override_<G>:`) and `sweep:` files (doc §2).

A recipe file may describe many jobs. srtctl submits each variant as its own Slurm job; srt needs
the same list, with the same names and selectors, so that `-f file.yaml:SEL` picks the same jobs
and result directories line up with what users had under srtctl.

Key order is kept (dicts are insertion ordered; merges keep the base's order and append new
keys), because srtctl writes the resolved variant with the base's key order.
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from srt_srtctl.errors import Problem, RecipeError

OVERRIDE = "override_"
ZIP_OVERRIDE = "zip_override_"


@dataclass(frozen=True)
class Variant:
    """One job described by a recipe file."""

    selector: str | None
    """As the oracle writes it: None (plain file), `base`, `override_X`, `zip_override_G[i]`."""
    suffix: str | None
    """`X` or `G_i`: srtctl writes the variant as `config_<suffix>.yaml`."""
    config: dict[str, Any]

    @property
    def config_file_name(self) -> str:
        return f"config_{self.suffix}.yaml" if self.suffix else "config.yaml"


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """srtctl's merge: dicts recurse, anything else replaces, an explicit null deletes."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def is_override_file(data: Mapping[str, Any]) -> bool:
    return "base" in data or any(
        isinstance(k, str) and k.startswith((OVERRIDE, ZIP_OVERRIDE)) for k in data
    )


def _zip_leaves(tree: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list[Any]]]:
    leaves: list[tuple[tuple[str, ...], list[Any]]] = []
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            leaves.extend(_zip_leaves(value, (*path, str(key))))
    elif isinstance(tree, list):
        leaves.append((path, tree))
    return leaves


def _pick(tree: Any, index: int) -> Any:
    """Element `index` of every list leaf (length-1 lists broadcast); scalars pass through."""
    if isinstance(tree, Mapping):
        return {key: _pick(value, index) for key, value in tree.items()}
    if isinstance(tree, list):
        return copy.deepcopy(tree[0] if len(tree) == 1 else tree[index])
    return copy.deepcopy(tree)


def zip_length(group: str, section: Mapping[str, Any]) -> int:
    """Number of variants of a zip group; rejects empty and mismatched dimensions."""
    problems: list[Problem] = []
    lengths: dict[int, list[str]] = {}
    for path, values in _zip_leaves(section):
        if not values:
            problems.append(
                Problem((f"{ZIP_OVERRIDE}{group}", *path), "empty list in zip override")
            )
            continue
        if len(values) != 1:
            lengths.setdefault(len(values), []).append(".".join(path))
    if len(lengths) > 1:
        detail = ", ".join(f"{n}: {', '.join(keys)}" for n, keys in sorted(lengths.items()))
        problems.append(
            Problem((f"{ZIP_OVERRIDE}{group}",), f"Incompatible zip lengths ({detail})")
        )
    if problems:
        raise RecipeError(problems)
    return next(iter(lengths), 1)


def expand_variants(data: Mapping[str, Any]) -> list[Variant]:
    """Every variant of a recipe file, `base` included (selection drops it by default)."""
    if "sweep" in data:
        return expand_sweep(data)
    if not is_override_file(data):
        return [Variant(None, None, dict(data))]
    problems: list[Problem] = []
    base = data.get("base")
    if not isinstance(base, Mapping):
        raise RecipeError([Problem(("base",), "an override file needs a `base:` mapping")])
    for key in data:
        if key not in ("base", "lock") and not str(key).startswith((OVERRIDE, ZIP_OVERRIDE)):
            problems.append(Problem((key,), "Unknown field. (override files hold base/override_*)"))
    if problems:
        raise RecipeError(problems)
    variants = [Variant("base", None, dict(base))]
    for key, section in data.items():
        if key not in ("base", "lock"):
            variants.extend(_section_variants(str(key), section or {}, base))
    return variants


def _section_variants(key: str, section: Any, base: Mapping[str, Any]) -> list[Variant]:
    if not isinstance(section, Mapping):
        raise RecipeError([Problem((key,), "an override section must be a mapping")])
    base_name = base.get("name")
    if key.startswith(ZIP_OVERRIDE):
        group = key[len(ZIP_OVERRIDE) :]
        variants = []
        for i in range(zip_length(group, section)):
            picked = _pick(section, i)
            merged = deep_merge(base, picked)
            if "name" not in picked:
                merged["name"] = f"{base_name}_{group}_{i}"
            variants.append(Variant(f"{key}[{i}]", f"{group}_{i}", merged))
        return variants
    suffix = key[len(OVERRIDE) :]
    merged = deep_merge(base, section)
    if "name" not in section:
        merged["name"] = f"{base_name}_{suffix}"
    return [Variant(key, suffix, merged)]


def _selector_sort_key(variant: Variant) -> tuple[str, int]:
    selector = variant.selector or ""
    match = re.fullmatch(r"(.*)\[(\d+)\]", selector)
    if match:
        return (match.group(1), int(match.group(2)))
    return (selector, -1)


def select_variants(variants: list[Variant], selector: str | None = None) -> list[Variant]:
    """srtctl's `-f file.yaml:SEL`; without SEL every variant except `base` (doc §2).

    The result is ordered by selector (group name, then index), the order the oracle lists.
    """
    if len(variants) == 1 and variants[0].selector is None:
        if selector not in (None, "base"):
            raise RecipeError([Problem((), f"selector {selector!r} given for a plain recipe")])
        return variants
    if selector is None:
        chosen = [v for v in variants if v.selector != "base"]
    else:
        chosen = []
        for v in variants:
            sel = v.selector or ""
            group = sel.split("[", 1)[0]
            if (
                selector in (sel, group)
                or fnmatch.fnmatchcase(sel, selector)
                or (fnmatch.fnmatchcase(group, selector) and group != "base")
            ):
                chosen.append(v)
        if not chosen:
            known = ", ".join(v.selector or "" for v in variants)
            raise RecipeError([Problem((), f"no variant matches {selector!r} (known: {known})")])
    return sorted(chosen, key=_selector_sort_key)


def _substitute(tree: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(tree, Mapping):
        return {k: _substitute(v, values) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_substitute(v, values) for v in tree]
    if isinstance(tree, str):
        for param, value in values.items():
            tree = tree.replace("{" + param + "}", str(value))
    return tree


def expand_sweep(data: Mapping[str, Any]) -> list[Variant]:
    """`sweep: {param: [values]}`: the cartesian product, `{param}` replaced in every string."""
    sweep = data.get("sweep")
    if not isinstance(sweep, Mapping) or not sweep:
        raise RecipeError([Problem(("sweep",), "sweep must map parameter names to value lists")])
    problems = [
        Problem(("sweep", str(k)), "a sweep parameter needs a non-empty list")
        for k, v in sweep.items()
        if not isinstance(v, list) or not v
    ]
    if problems:
        raise RecipeError(problems)
    body = {k: v for k, v in data.items() if k != "sweep"}
    names = list(sweep)
    variants = []
    for combo in itertools.product(*(sweep[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        config = _substitute(body, values)
        suffix = "_".join(f"{n}{v}" for n, v in values.items())
        config["name"] = f"{body.get('name')}_{suffix}"
        variants.append(Variant(suffix, suffix, config))
    return variants
