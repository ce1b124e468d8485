"""JSON Schemas of the protocol documents, generated from the pydantic models.

The committed ``*.schema.json`` files are what module authors in other languages validate
against, so they must never drift from the models: ``python -m oarbank_protocol.schemas``
regenerates them and a test fails when they are stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from oarbank_protocol.documents import (
    Document,
    ErrorDocument,
    Fingerprint,
    OpResult,
    OwnedList,
    Status,
)

SCHEMA_DIR: Final = Path(__file__).resolve().parent
JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

SCHEMA_MODELS: Final[dict[str, type[Document]]] = {
    "service-fingerprint-1.schema.json": Fingerprint,
    "service-opresult-1.schema.json": OpResult,
    "service-status-1.schema.json": Status,
    "service-ownedlist-1.schema.json": OwnedList,
    "service-error-1.schema.json": ErrorDocument,
}


def build_schema(file_name: str) -> dict[str, Any]:
    model = SCHEMA_MODELS[file_name]
    schema = model.model_json_schema(mode="validation")
    schema = {"$schema": JSON_SCHEMA_DIALECT, "$id": file_name, **schema}
    schema["description"] = (
        f"Service protocol 1: {model.__name__} document. Unknown fields are allowed (forward "
        "compatible) and reported by the agent."
    )
    return schema


def render_schema(file_name: str) -> str:
    return json.dumps(build_schema(file_name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into ``directory`` and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMA_MODELS:
        path = directory / name
        path.write_text(render_schema(name), encoding="utf-8")
        written.append(path)
    return written


def stale_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """Names of schema files that are missing or differ from what the models generate."""
    stale = []
    for name in SCHEMA_MODELS:
        path = directory / name
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            stale.append(name)
            continue
        if current != render_schema(name):
            stale.append(name)
    return stale
