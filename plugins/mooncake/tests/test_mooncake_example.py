"""``examples/mooncake-local.yaml``: it plans as its comments say, it runs here (on ports the
kernel hands out, since its defaults may be taken by another session), and mutations of its
Mooncake entries give clean load errors, never a traceback."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.extend import Plan
from srt_services.testing import PluginSet, RecipeError, kit
from srt_services.testing.jobs import run_recipe
from srt_services.testing.survivors import assert_no_survivors

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mooncake-local.yaml"


def test_the_example_plans_as_it_says(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(EXAMPLE.read_text(), local=True, job_dir="<job_dir>", source=str(EXAMPLE))
    assert plan.discovery_env == {
        "MOONCAKE_MASTER": "127.0.0.1:8700",
        "MOONCAKE_TE_META_DATA_SERVER": "http://127.0.0.1:8701/metadata",
        "MOONCAKE_PROTOCOL": "tcp",
    }
    nodes = {u.name: [i.node_ip for i in u.instances] for u in plan.units}
    assert nodes["store"] == ["127.0.0.1"] and nodes["pool-store"] == ["127.0.0.2"]
    (worker,) = next(u for u in plan.units if u.name == "agg").instances
    assert worker.env["MOONCAKE_GLOBAL_SEGMENT_SIZE"] == "0"


def test_srt_dry_run_shows_the_example() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", "--local", str(EXAMPLE)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "  MOONCAKE_MASTER=127.0.0.1:8700\n" in out
    assert "before_workers: mooncake-master, store, pool-store" in out


@pytest.mark.component
@pytest.mark.slow
def test_the_example_runs_here(
    tmp_path: Path, srt_free_port: Callable[[], int], mooncake: dict[str, str]
) -> None:
    ports = {p: str(srt_free_port()) for p in ("8700", "8701", "8702", "8800", "8801")}
    text = re.sub(r"\b(87\d\d|88\d\d)\b", lambda m: ports[m.group(1)], EXAMPLE.read_text())
    recipe = tmp_path / "mooncake-local.yaml"
    recipe.write_text(text)
    job_dir = str(tmp_path / "job")
    job = run_recipe(str(recipe), job_dir, timeout=120)
    try:
        assert job.code == 0, job.stdout + job.stderr
        bench = job.log("benchmark")
        assert "got 'hello' via http://127.0.0.2:" in bench
        assert "master_key_count 1" in bench
        assert "MOONCAKE_GLOBAL_SEGMENT_SIZE=0" in job.log("agg_0")
    finally:
        assert_no_survivors(job_dir)


SEED: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 70000),
    st.floats(allow_nan=True),
    st.sampled_from(["", "64MB", "4GN", "-1", "10.0.0.1:8700", "http://x:1", "rdma", "{node_ip}"]),
    st.lists(st.sampled_from(["--port", "8800", "--port=x", "--config"]), max_size=3),
    st.dictionaries(st.sampled_from(["global_segment_size", "protocol", "x"]), st.text(max_size=5)),
)
KEYS = st.sampled_from(
    [
        "external", "args", "command", "start", "after", "enabled", "container", "nodes",
        "placement", "options.port", "options.rpc_port", "options.metadata_port",
        "options.global_segment_size", "options.local_buffer_size", "options.protocol",
        "options.store_config", "options.eviction_high_watermark_ratio", "options.binary",
        "env.MOONCAKE_GLOBAL_SEGMENT_SIZE", "type",
    ]
)  # fmt: skip


@settings(
    max_examples=150,
    deadline=2000,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_mutated_mooncake_entries_fail_cleanly(srt_plugins: PluginSet, data: st.DataObject) -> None:
    recipe = copy.deepcopy(SEED)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        entry = recipe["services"][data.draw(st.integers(0, 2), label="entry")]
        key = data.draw(KEYS, label="key")
        value = data.draw(VALUES, label="value")
        head, _, tail = key.partition(".")
        if tail:
            if not isinstance(entry.get(head), dict):
                entry[head] = {}
            entry[head][tail] = value
        elif value is None:
            entry.pop(head, None)
        else:
            entry[head] = value
    if data.draw(st.booleans(), label="reorder"):
        recipe["services"].reverse()
    text = yaml.safe_dump(recipe)
    failure: RecipeError | None = None
    try:
        kit.plan(srt_plugins, text, source="recipe.yaml")
    except RecipeError as exc:  # the only way out: anything else fails the test
        failure = exc
    if failure is not None:
        assert failure.errors, "a RecipeError names at least one problem"
        for problem in failure.errors:
            assert problem.render("recipe.yaml").startswith("recipe.yaml")
