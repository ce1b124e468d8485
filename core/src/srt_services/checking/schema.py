"""The recipe's JSON Schema, for editors (completion and inline errors).

Built from the pydantic models, then completed with what the installed plugins add: every
registered probe becomes a property of ``readiness``/``liveness``, and each kind's options
model applies to ``options`` when ``type`` names that kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from srt_services.recipe.models import Recipe

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet

SCHEMA_ID = "https://srt.invalid/schemas/recipe-2.json"


def _inline_defs(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Move a sub-model's ``$defs`` into the shared table so references resolve."""
    for name, value in schema.pop("$defs", {}).items():
        defs.setdefault(name, value)
    return schema


def _one_or_many(properties: dict[str, Any], key: str) -> None:
    """A list field whose model also accepts one mapping (``metrics: {port: 9000}``)."""
    prop = properties.get(key)
    if not prop or prop.get("type") != "array" or "items" not in prop:
        return
    item = prop.pop("items")
    del prop["type"]
    prop["anyOf"] = [item, {"type": "array", "items": item}]


def recipe_schema(plugins: PluginSet) -> dict[str, Any]:
    schema = Recipe.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    probes = plugins.probes()
    for block in ("ReadinessSpec", "LivenessSpec"):
        target = defs.get(block)
        if target is None:
            continue
        props = target.setdefault("properties", {})
        for name, probe in probes.items():
            sub = _inline_defs(probe.Config.model_json_schema(by_alias=True), defs)
            sub.setdefault("description", probe.summary)
            props[name] = sub
        target["additionalProperties"] = False
        target["minProperties"] = 1
    service = defs.get("ServiceSpec")
    if service is not None:
        rules = []
        for name, kind in plugins.kinds().items():
            options = _inline_defs(kind.Options.model_json_schema(by_alias=True), defs)
            rules.append(
                {
                    "if": {"properties": {"type": {"const": name}}, "required": ["type"]}
                    if name != "generic"
                    else {
                        "anyOf": [
                            {"not": {"required": ["type"]}},
                            {"properties": {"type": {"const": "generic"}}},
                        ]
                    },
                    "then": {"properties": {"options": options}},
                }
            )
        service["allOf"] = rules
        service["properties"]["type"]["examples"] = sorted(plugins.kinds())
        _one_or_many(service["properties"], "metrics")
    for name in ("RoleSpec", "FrontendSpec"):
        if name in defs:
            _one_or_many(defs[name].get("properties", {}), "metrics")
    return schema
