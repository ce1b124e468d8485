"""Fuzzing loading + planning (the composition root's ``load`` and ``plan``): only our
validation error may ever escape.

Three sources of input: the example recipes mutated (values, keys and types changed,
entries dropped or added), random YAML-ish text, and random bytes. Whatever comes in, the
result is a plan or a :class:`RecipeInvalid` whose message is plain text with positions:
never another exception, never a traceback, never a hang (each example has a 1 s deadline).
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.app import compose
from srt_services.checking.rules.external import external_url_problems
from srt_services.contracts.allocation import AllocationRequest
from srt_services.errors import RecipeInvalid
from srt_services.recipe.problems import RecipeError
from srt_services.testing import kit

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SEEDS = ["minimal", "disagg-services", "pools", "per-worker"]
SEED_DATA = {name: yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()) for name in SEEDS}

#: The built-ins and an empty site config. Text goes to the composition root as it is (not
#: through ``kit.load``, which dedents): the fuzzed bytes are what the loader sees.
WHERE = kit.setup()

#: ``SRT_FUZZ_RANDOM=1 SRT_FUZZ_SCALE=50`` fuzzes longer with fresh randomness (CI runs the
#: fixed, derandomized set so that a failure is reproducible).
SCALE = int(os.environ.get("SRT_FUZZ_SCALE", "1"))
FUZZ = settings(
    deadline=1000,
    database=None,
    derandomize=os.environ.get("SRT_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Integers that sit on the rules' edges, without the "valid but huge" band (a legitimate
# 90,000-node plan takes seconds and is a benchmark, not a fuzz case).
INTS = st.one_of(
    st.integers(-3, 20),
    st.sampled_from(
        [63, 64, 99, 100, 599, 600, 1024, 1025, 65536, 100_001, 2**31, 2**63, -(2**63), 10**30]
    ),
)
WORDS = st.sampled_from(
    [
        "",
        " ",
        "a",
        "main",
        "HEAD",
        "refs/heads/x",
        "v1.0",
        "0123abcd",
        "../x",
        "a/b",
        ".",
        "..",
        "-x",
        "a\x00b",
        "a\nb",
        "{node}",
        "{nod}",
        "{{node}}",
        "{worker_gpus}",
        '{"a": {"b": 1}}',
        "/metrics",
        "metrics",
        "/health",
        "head",
        "infra",
        "dedicated",
        "prefill",
        "decode",
        "agg",
        "workers",
        "compute",
        "all",
        "pool",
        "node",
        "worker",
        "infra",
        "before_workers",
        "after_frontend",
        "generic",
        "etcd",
        "tcp",
        "http",
        "log",
        "file",
        "port",
        "none",
        "vllm",
        "sglang",
        "dynamo",
        "nats",
        "command",
        "manual",
        "always",
        "no",
        "on-failure",
        "first",
        "train",
        "envsrv",
        "kv-router",
        "my-sidecar",
        "gpu-watch",
        "SRT_X",
        "LD_PRELOAD",
        "(",
        "x" * 70,
        "\u0440outer",  # a Cyrillic look-alike
        "http://x.invalid:1",
        "yes",
        "null",
        "~",
        "*",
        "&a",
        "!!int",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    st.floats(allow_nan=True, allow_infinity=True),
    WORDS,
    st.text(max_size=20),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(WORDS, st.text(max_size=8)), inner, max_size=4),
    ),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    for item in path:
        root = root[item]
    return root


def _mutate(data: st.DataObject, root: Any) -> Any:
    paths = _paths(root)
    path = data.draw(st.sampled_from(paths), label="path")
    action = data.draw(
        st.sampled_from(["replace", "delete", "add", "rename", "wrap", "stringify", "duplicate"]),
        label="action",
    )
    if not path:
        return data.draw(VALUES, label="root") if action == "replace" else root
    parent = _get(root, path[:-1])
    key = path[-1]
    if action == "replace":
        parent[key] = data.draw(VALUES, label="value")
    elif action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent[data.draw(st.one_of(WORDS, st.text(max_size=10)), label="key")] = data.draw(VALUES)
    elif action == "add" and isinstance(parent, list):
        parent.insert(key, data.draw(VALUES, label="item"))
    elif action == "rename" and isinstance(parent, dict) and isinstance(key, str):
        new = data.draw(st.sampled_from([key[:-1], key + "s", key.upper(), "_" + key, key[1:]]))
        parent[new] = parent.pop(key)
    elif action == "wrap":
        parent[key] = [parent[key]]
    elif action == "stringify":
        parent[key] = json.dumps(parent[key])
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))
    return root


def _check(text: str, source: str, nodes: int | None) -> None:
    try:
        loaded = compose.load(WHERE, source, text=text)
        plan = compose.plan(WHERE, loaded, AllocationRequest(count=nodes)).plan
    except RecipeInvalid as exc:
        _check_error(exc)
        return
    # a recipe that resolves must also serialise
    assert plan.to_json()


def _check_error(exc: RecipeInvalid) -> None:
    message = str(exc)
    assert message
    assert "Traceback" not in message
    assert "\x00" not in message
    if isinstance(exc, RecipeError):
        assert exc.errors
        for p in exc.errors:
            assert p.message
            assert "\n" not in p.label


def _mutated_text(data: st.DataObject, seed: Any) -> tuple[str, bool] | None:
    """``seed`` mutated 1-4 times, as JSON or YAML text (and which); None if unwritable."""
    root = copy.deepcopy(seed)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        root = _mutate(data, root)
    as_json = data.draw(st.booleans(), label="json")
    try:
        return (json.dumps(root) if as_json else yaml.safe_dump(root, allow_unicode=True)), as_json
    except (ValueError, TypeError):
        return None  # not representable (e.g. NaN keys): nothing a user could write either


@settings(FUZZ, max_examples=400 * SCALE)
@given(data=st.data())
def test_mutated_examples(data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(SEEDS), label="seed")
    mutated = _mutated_text(data, SEED_DATA[seed])
    if mutated is None:
        return
    text, as_json = mutated
    nodes = data.draw(st.one_of(st.none(), st.integers(1, 8)), label="nodes")
    _check(text, "recipe.json" if as_json else "recipe.yaml", nodes)


YAML_ALPHABET = st.sampled_from(
    [*"abcnode_-: \n\t[]{},&*!|>'\"#%@`?~.0123456789", "\u2028", "é", "\x85"]
)


@settings(FUZZ, max_examples=300 * SCALE)
@given(
    head=st.sampled_from(["", "schema: 2\nname: t\n", "schema: 2\nname: t\nservices:\n  - "]),
    body=st.text(YAML_ALPHABET, max_size=120),
)
def test_random_yaml_text(head: str, body: str) -> None:
    _check(head + body, "recipe.yaml", None)


FRAGMENTS = st.sampled_from(
    [
        "!!int ",
        "!!float ",
        "!!bool ",
        "!!str ",
        "!!null ",
        "!!binary ",
        "!!timestamp ",
        "!!python/object:os.system ",
        "!x ",
        "&a ",
        "*a",
        "<<: ",
        "<<: *a",
        "[*a]",
        "? ",
        "- ",
        ": ",
        "{",
        "}",
        "[",
        "]",
        ", ",
        "\n",
        "\n  ",
        "\n    ",
        "\t",
        "0x1f",
        "0o17",
        "017",
        "1_0",
        "190:20:30",
        "1e400",
        ".nan",
        "-.inf",
        "²",
        "٣",
        "yes",
        "~",
        "''",
        '"',
        "|\n  x",
        ">-\n  y",
        "name",
        "schema",
        "services",
        "command",
        "nodes",
        "readiness",
        "port",
        "2",
        "a",
        "%YAML 1.1\n",
        "---\n",
        "...\n",
        "#c",
    ]
)


@settings(FUZZ, max_examples=300 * SCALE)
@given(
    head=st.sampled_from(
        ["", "schema: 2\nname: t\n", "schema: 2\nname: t\nservices:\n  - name: a\n    "]
    ),
    parts=st.lists(FRAGMENTS, max_size=25),
)
def test_random_yaml_fragments(head: str, parts: list[str]) -> None:
    _check(head + "".join(parts), "recipe.yaml", None)


@settings(FUZZ, max_examples=150 * SCALE)
@given(raw=st.binary(max_size=200))
def test_random_bytes(raw: bytes) -> None:
    with tempfile.NamedTemporaryFile("wb", suffix=".yaml", delete=False) as fh:
        fh.write(raw)
        name = fh.name
    try:
        try:
            kit.plan(WHERE.plugins, Path(name))
        except RecipeInvalid as exc:
            _check_error(exc)
    finally:
        os.unlink(name)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_seeds_themselves_resolve(seed: str) -> None:
    _check((EXAMPLES / f"{seed}.yaml").read_text(), "recipe.yaml", None)


@settings(FUZZ, max_examples=300 * SCALE)
@given(
    url=st.one_of(
        st.text(max_size=80),
        st.lists(
            st.from_regex(
                r"(https?|nats|ftp)?(://)?[a-z0-9:.\[\]]{0,12}(/[a-z?#]*)?", fullmatch=True
            ),
            max_size=4,
        ).map(",".join),
    )
)
def test_external_urls(url: str) -> None:
    """Every ``external`` value yields messages, never an exception (urlsplit raises on some
    bracketed hosts and ports)."""
    got = external_url_problems(url, ("http", "https"))
    assert all(isinstance(m, str) and m for m in got)


# --------------------------------------------------------------------------- srt migrate

V1_SEED: dict[str, Any] = {
    "name": "old",
    "frontend": {"type": "dynamo", "command": ["f"]},
    "dynamo": {"request_plane": "nats"},
    "infra": {"etcd_nats_dedicated_node": True, "nats_max_payload_mb": 24},
    "roles": {"agg": {"workers": 1, "command": ["w"], "env": {"A": "1"}}},
    "backend": {
        "type": "sglang",
        "mooncake_kv_store": {
            "container": "mc",
            "master_extra_args": ["--x"],
            "store_config": {"a": 1},
            "env": {"MC": "1"},
        },
    },
    "services": [{"name": "side", "command": ["s"]}],
}


def _check_migrate(text: str) -> None:
    """Only our error may escape; a migrated text is schema 2 and migrates to itself."""
    from srt_services.recipe.migrate import UNCHANGED, migrate_text
    from srt_services.recipe.source import parse_text

    try:
        out, notes = migrate_text(text, "v1.yaml")
    except RecipeInvalid as exc:
        _check_error(exc)
        return
    if notes == [UNCHANGED]:
        assert out == text
        return
    data = parse_text(out, "v1.yaml").data
    assert isinstance(data, dict) and data["schema"] == 2
    assert "infra" not in data
    again, notes = migrate_text(out, "v1.yaml")
    assert (again, notes) == (out, [UNCHANGED])


@settings(FUZZ, max_examples=300 * SCALE)
@given(data=st.data())
def test_migrate_mutated_v1(data: st.DataObject) -> None:
    mutated = _mutated_text(data, V1_SEED)
    if mutated is not None:
        _check_migrate(mutated[0])


@settings(FUZZ, max_examples=200 * SCALE)
@given(
    head=st.sampled_from(["", "name: t\ninfra:\n  ", "name: t\nbackend:\n  mooncake_kv_store: "]),
    parts=st.lists(FRAGMENTS, max_size=25),
)
def test_migrate_random_fragments(head: str, parts: list[str]) -> None:
    _check_migrate(head + "".join(parts))


@settings(FUZZ, max_examples=100 * SCALE)
@given(
    order=st.permutations(sorted(V1_SEED)),
    said=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=40, max_size=40),
)
def test_migrate_keeps_every_comment(order: list[str], said: list[tuple[bool, bool]]) -> None:
    """Comments are promised to be kept: whatever the v1 keys it rewrites (and in whatever
    order), each comment of the recipe is in the result once, in the order it was written."""
    from srt_services.recipe.migrate import migrate_text

    text = yaml.safe_dump({k: V1_SEED[k] for k in order}, sort_keys=False)
    lines: list[str] = []
    n = 0
    for line, (inline, above) in zip(text.splitlines(), said, strict=False):
        if above and not line.startswith((" ", "-")):  # above a top-level key
            lines += ["", f"# c{n} about {line.split(':')[0]}"]
            n += 1
        lines.append(f"{line}   # c{n}" if inline else line)
        n += inline
    out, _ = migrate_text("\n".join(lines) + "\n", "v1.yaml")
    found = re.findall(r"# (c\d+)", out)
    assert found == [f"c{i}" for i in range(n)], out
