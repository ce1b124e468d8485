"""Typed documents: strict types naming the field, unknown fields reported, manifests strict."""

from __future__ import annotations

import json

import pytest
from oarbank_protocol.documents import (
    ErrorCode,
    ErrorDocument,
    Fingerprint,
    OpResult,
    OwnedList,
    Status,
    parse_document,
)
from oarbank_protocol.errors import DocumentSchemaError, DocumentSyntaxError, ManifestError
from oarbank_protocol.manifest import ModuleManifest, parse_manifest


def raw(value: object) -> bytes:
    return json.dumps(value).encode()


def test_fingerprint_full_document_round_trips() -> None:
    doc = {
        "health": "healthy",
        "detail": "",
        "attrs": {"version": "1.2", "cores": 8, "ratio": 0.5, "gpu": False},
        "pools": {"containers": 4},
        "reserve": {"mem_gb": 6},
        "running": True,
        "pid": 1234,
    }
    parsed = parse_document(Fingerprint, raw(doc))
    assert parsed.document.pools == {"containers": 4}
    assert parsed.document.reserve.mem_gb == 6.0
    assert parsed.unknown_fields == ()


def test_unknown_fields_are_ignored_but_reported_with_paths() -> None:
    doc = {
        "objects": [
            {"id": "a", "kind": "vm", "labels": {}, "colour": "red"},
            {"id": "b", "kind": "vm", "colour": "blue"},
        ],
        "next_page": None,
    }
    parsed = parse_document(OwnedList, raw(doc))
    assert [o.id for o in parsed.document.objects] == ["a", "b"]
    assert parsed.unknown_fields == ("next_page", "objects[].colour")


@pytest.mark.parametrize(
    ("model", "doc", "field"),
    [
        (Fingerprint, {"health": "healthy", "running": "yes"}, "running"),
        (Fingerprint, {"health": "fine"}, "health"),
        (Fingerprint, {"health": "healthy", "pools": {"gpu": "2"}}, "pools.gpu"),
        (Fingerprint, {"health": "healthy", "pools": {"gpu": -1}}, "pools.gpu"),
        (Fingerprint, {"health": "healthy", "reserve": {"mem_gb": "8"}}, "reserve.mem_gb"),
        (Fingerprint, {"health": "healthy", "attrs": {"x": [1]}}, "attrs"),
        (Status, {"running": 1, "ready": False}, "running"),
        (Status, {"running": True}, "ready"),
        (OpResult, {"escalated": "no"}, "escalated"),
        (OwnedList, {"objects": [{"id": "", "kind": "vm"}]}, "objects[0].id"),
        (
            OwnedList,
            {"objects": [{"id": "x", "kind": "vm", "labels": {"a": 1}}]},
            "objects[0].labels.a",
        ),
    ],
)
def test_wrong_types_name_the_field(model: type, doc: dict[str, object], field: str) -> None:
    with pytest.raises(DocumentSchemaError) as info:
        parse_document(model, raw(doc))
    assert field in info.value.fields
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"hello", "not JSON"),
        (b'{"a":1}{"a":1}', "more than one"),
        (b'{"a":1} trailing', "more than one"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"[1,2]", "array"),
        (b"null", "null"),
        (b'"text"', "string"),
        (b'{"a":1,"a":2}', "duplicate"),
        (b'{"a": NaN}', "NaN"),
        (b"\xef\xbb\xbf{}", "byte order mark"),
    ],
)
def test_syntax_errors_explain_themselves(data: bytes, reason: str) -> None:
    with pytest.raises(DocumentSyntaxError) as info:
        parse_document(Status, data)
    assert reason in str(info.value)


def test_excerpt_is_truncated() -> None:
    with pytest.raises(DocumentSyntaxError) as info:
        parse_document(Status, b"x" * 10_000)
    assert len(info.value.excerpt) < 300
    assert "10000 bytes" in info.value.excerpt


def test_error_document_retryable_table() -> None:
    assert ErrorDocument(code=ErrorCode.TRY_AGAIN_LATER, msg="x").is_retryable()
    assert ErrorDocument(code=ErrorCode.BUSY, msg="x").is_retryable()
    assert not ErrorDocument(code=ErrorCode.INVALID_CONFIG, msg="x").is_retryable()
    assert not ErrorDocument(code=ErrorCode.UNSUPPORTED_FIELD, msg="x").is_retryable()
    assert ErrorDocument(code=150, msg="module specific").is_retryable()
    assert not ErrorDocument(code=150, msg="x", retryable=False).is_retryable()
    assert ErrorDocument(code=7, msg="x", retryable=True).is_retryable()


def minimal_manifest(**service: object) -> dict[str, object]:
    return {"name": "mod", "services": [{"name": "svc", "exec": ["bin/svc"], **service}]}


def test_manifest_defaults_follow_the_numbers_to_adopt() -> None:
    manifest = ModuleManifest.model_validate(minimal_manifest())
    spec = manifest.services[0]
    assert spec.lifecycle == "on_demand"
    assert spec.start_timeout_s == 120
    assert spec.restart.backoff_initial_s == 10
    assert spec.restart.backoff_max_s == 300
    assert spec.restart.jitter == 0.25
    assert spec.restart.reset_after == 600
    assert spec.op_timeout("start") == 120
    assert spec.op_timeout("fingerprint") is None


@pytest.mark.parametrize(
    ("service", "needle"),
    [
        ({"idle_timout_s": 5}, "idle_timout_s"),
        ({"lifecycle": "sometimes"}, "lifecycle"),
        ({"idle_timeout_s": "5"}, "idle_timeout_s"),
        ({"start_timeout_s": 0}, "start_timeout_s"),
        ({"restart": {"backoff_initial_s": 10, "backoff_max_s": 1}}, "backoff_max_s"),
        ({"restart": {"max_failures": 0}}, "max_failures"),
        ({"exec": []}, "exec"),
        ({"exec": [""]}, "exec"),
        ({"name": "../x"}, "name"),
        ({"name": "-rf"}, "name"),
        ({"pools": ["a", "a"]}, "pools"),
        ({"timeouts": {"fingerprint": 1, "bogus": 2}}, "bogus"),
    ],
)
def test_manifest_is_strict(service: dict[str, object], needle: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(minimal_manifest(**service))
    assert needle in str(info.value)


def test_manifest_rejects_duplicate_names_and_unknown_top_level_keys() -> None:
    data = minimal_manifest()
    data["probes"] = [{"name": "svc", "exec": ["bin/p"]}]
    with pytest.raises(ManifestError, match="duplicate"):
        parse_manifest(data)
    with pytest.raises(ManifestError, match="colour"):
        parse_manifest({**minimal_manifest(), "colour": "red"})


def test_probe_entry() -> None:
    manifest = ModuleManifest.model_validate(
        {"name": "m", "probes": [{"name": "jdk", "exec": ["bin/jdk"], "period_s": 10}]}
    )
    probe = manifest.probe("jdk")
    assert (probe.period_s, probe.failure_threshold, probe.success_threshold) == (10, 3, 1)
    with pytest.raises(ManifestError, match="no probe"):
        manifest.probe("nope")


def test_broker_containers_are_not_silently_accepted() -> None:
    """srt runs the sandbox but no container broker yet; a manifest that declares containers
    is told so (rather than believing its containers are brokered)."""
    with pytest.raises(ManifestError, match=r"sandbox\.containers"):
        parse_manifest({"name": "m", "sandbox": {"containers": ["redis"]}})
