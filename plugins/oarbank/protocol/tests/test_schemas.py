"""The committed JSON Schemas must match the models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from oarbank_protocol.schemas import SCHEMA_DIR, SCHEMA_MODELS, export_schemas, stale_schemas
from oarbank_testkit import SRC_DIR

REQUIRED = {
    "service-fingerprint-1.schema.json",
    "service-opresult-1.schema.json",
    "service-status-1.schema.json",
    "service-ownedlist-1.schema.json",
}


def test_committed_schemas_are_current() -> None:
    assert set(SCHEMA_MODELS) >= REQUIRED
    stale = stale_schemas()
    assert not stale, f"regenerate with `python -m oarbank_protocol.schemas`: {stale}"


def test_schema_files_are_valid_json_with_ids() -> None:
    for name in SCHEMA_MODELS:
        schema = json.loads((SCHEMA_DIR / name).read_text())
        assert schema["$id"] == name
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is True


def test_export_and_stale_detection(tmp_path: Path) -> None:
    written = export_schemas(tmp_path)
    assert {p.name for p in written} == set(SCHEMA_MODELS)
    assert stale_schemas(tmp_path) == []
    (tmp_path / "service-status-1.schema.json").write_text("{}\n")
    assert stale_schemas(tmp_path) == ["service-status-1.schema.json"]


def test_regenerator_module_check_mode(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(SRC_DIR), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        [sys.executable, "-m", "oarbank_protocol.schemas", "--check"],
        env=env,
        capture_output=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    out = subprocess.run(
        [sys.executable, "-m", "oarbank_protocol.schemas", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        check=False,
        text=True,
    )
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == len(SCHEMA_MODELS)
