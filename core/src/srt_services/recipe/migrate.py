"""``srt migrate``: the v1 layout (``infra:``, ``backend.mooncake_kv_store``) to schema 2.

v1 recipes configured the discovery plane and the Mooncake master through dedicated keys;
schema 2 says the same with ``services:`` entries. The rewrite is mechanical and idempotent.
Comments are not preserved (PyYAML drops them); the original is kept as ``<file>.v1`` with
``--in-place``.
"""

from __future__ import annotations

from typing import Any

import yaml

from srt_services.recipe.load import read_text
from srt_services.recipe.problems import LocatedProblem, RecipeError


def migrate_data(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    if data.get("schema") == 2:
        return data, ["already schema 2; nothing to do"]
    out: dict[str, Any] = {"schema": 2}
    services: list[dict[str, Any]] = list(data.get("services") or [])
    frontend = data.get("frontend") or {}
    ftype = frontend.get("type", "dynamo") if isinstance(frontend, dict) else "dynamo"
    dynamo = data.get("dynamo") or {}
    planes_nats = isinstance(dynamo, dict) and "nats" in (
        dynamo.get("request_plane"),
        dynamo.get("event_plane"),
    )
    for key, value in data.items():
        if key == "schema":
            continue
        if key == "infra":
            infra = value or {}
            dedicated = bool(infra.get("etcd_nats_dedicated_node"))
            payload = infra.get("nats_max_payload_mb")
            if ftype != "dynamo":
                notes.append(f"dropped infra (no discovery plane under frontend.type {ftype})")
                continue
            if dedicated:
                services.insert(
                    0, {"name": "etcd", "type": "etcd", "placement": {"node": "dedicated"}}
                )
                notes.append(
                    "infra.etcd_nats_dedicated_node -> services etcd placement.node: dedicated"
                )
            if payload is not None or (dedicated and planes_nats):
                entry: dict[str, Any] = {"name": "nats", "type": "nats"}
                if dedicated:
                    entry["placement"] = {"node": "dedicated"}
                if payload is not None:
                    entry["options"] = {"max_payload_mb": payload}
                    notes.append(
                        "infra.nats_max_payload_mb -> services nats options.max_payload_mb"
                    )
                services.insert(1 if dedicated else 0, entry)
            continue
        if key == "backend" and isinstance(value, dict) and "mooncake_kv_store" in value:
            store = dict(value)
            kv = store.pop("mooncake_kv_store") or {}
            entry = {"name": "mooncake-master", "type": "mooncake-master"}
            if kv.get("container"):
                entry["container"] = kv["container"]
            if kv.get("master_extra_args"):
                entry["args"] = list(kv["master_extra_args"])
            if kv.get("store_config"):
                entry["options"] = {"store_config": kv["store_config"]}
            services.append(entry)
            notes.append("backend.mooncake_kv_store -> services mooncake-master")
            if store:
                out[key] = store
            continue
        out[key] = value
    if services:
        out["services"] = services
    return out, notes


def migrate_file(path: str) -> tuple[str, list[str]]:
    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RecipeError(path, [LocatedProblem("", f"YAML syntax error: {exc}")]) from None
    if not isinstance(data, dict):
        raise RecipeError(path, [LocatedProblem("", "a recipe is a mapping of settings")])
    migrated, notes = migrate_data(data)
    return yaml.safe_dump(migrated, sort_keys=False, default_flow_style=False), notes
