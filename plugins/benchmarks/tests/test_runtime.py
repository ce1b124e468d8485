"""The benchmarks under ``srt run`` against the real Dynamo 1.6: its frontend and a mocker
worker, with the etcd srt starts, on loopback. Each job ends when its benchmark does, and
its ``result.json`` carries the benchmark's summary; the ``srt_jobs`` fixture checks that
no process of the job survived.

Needs Dynamo and srt-dynamo next to srt (the ``dynamo`` tox environment installs them;
elsewhere these skip, and fail under ``SRT_REQUIRE_DYNAMO=1``) and etcd.
"""

from __future__ import annotations

import importlib.util
import json
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing import needs
from srt_services.testing.jobs import Jobs

pytestmark = [pytest.mark.component, pytest.mark.slow]

REQUIRED_BY = "SRT_REQUIRE_DYNAMO"


@pytest.fixture(autouse=True)
def _dynamo() -> None:
    for module in ("dynamo.mocker", "srt_dynamo"):
        top = module.split(".")[0]
        if importlib.util.find_spec(top) is None or importlib.util.find_spec(module) is None:
            needs.missing(f"needs {module} next to srt (tox -e dynamo installs it)", REQUIRED_BY)
    if needs.venv_script("etcd") is None:
        needs.missing("needs etcd (apt-get install etcd-server)", REQUIRED_BY)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory for the mocker, the frontend and sa-bench's prompts, built by
    srt-dynamo's own command (plugins never import each other; nothing downloaded)."""
    path = tmp_path_factory.mktemp("models") / "tiny"
    subprocess.run([sys.executable, "-m", "srt_dynamo.tiny_model", str(path)], check=True)
    return path


@pytest.fixture
def private(tmp_path: Path) -> dict[str, str]:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    return {"HOME": str(home), "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1"}


def _free(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_block(count: int) -> int:
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000)  # Dynamo reads DYN_SYSTEM_PORT as an i16
        if all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no block of free ports")


def recipe(model: Path, benchmark: dict[str, Any]) -> str:
    base = free_block(6)
    front, etcd, system = base, base + 2, base + 4
    doc = {
        "schema": 2,
        "name": "bench",
        "observability": {"metrics": False},
        "resources": {"gpus_per_node": 1},
        "engine": {
            "type": "mocker",
            "model": str(model),
            "options": {"mocker": {"speedup_ratio": 10}, "ports": {"system": system}},
        },
        "frontend": {"type": "dynamo", "port": front},
        "dynamo": {"request_plane": "tcp", "event_plane": "zmq"},
        "roles": {"agg": {"workers": 1}},
        "services": [
            {
                "name": "etcd",
                "type": "etcd",
                "options": {"client_port": etcd, "peer_port": etcd + 1},
            },
            {"name": "nats", "type": "nats", "enabled": False},
        ],
        "benchmark": benchmark,
    }
    return json.dumps(doc, indent=1)


def test_sa_bench_reports_throughput_and_percentiles_per_concurrency(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str]
) -> None:
    options = {
        "isl": 64,
        "osl": 12,
        "concurrencies": "1x4",
        "num_prompts_mult": 4,
        "num_warmup_mult": 1,
        "random_range_ratio": 1.0,
    }
    run = srt_jobs.run(
        recipe(tiny_model, {"type": "sa-bench", "options": options}), env=private, timeout=240
    )
    assert run.code == 0, run.stderr
    result = run.result()
    assert result["status"] == "succeeded"
    bench = result["benchmark"]
    assert bench["type"] == "sa-bench" and bench["passed"] is True
    assert bench["model"] == "tiny"  # not in the recipe: asked of the frontend
    assert [r["concurrency"] for r in bench["runs"]] == [1, 4]
    for r in bench["runs"]:
        assert r["requests"] == r["completed"] == 4 * r["concurrency"]
        assert r["failed"] == 0
        # ignore_eos: the mocker produced exactly osl tokens for each request
        assert r["output_tokens"] == 12 * r["requests"]
        assert r["request_throughput"] > 0 and r["output_throughput"] > 0
        for metric in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
            stats = r[metric]
            assert 0 < stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"], (metric, stats)
        # ITL is measured between events carrying token text; the mocker's ids decode to
        # no text, so Dynamo streams none and ITL is reported empty, not made up
        if r["token_events"] == 0:
            assert set(r["itl_ms"].values()) == {None}
        else:
            assert 0 <= r["itl_ms"]["p50"] <= r["itl_ms"]["p99"]
        assert r["ttft_ms"]["p50"] <= r["e2e_latency_ms"]["p50"]
    log = Path(run.job_dir, "logs").glob("*benchmark*")
    assert any("sa-bench concurrency=4" in p.read_text() for p in log)
    # the client leaves nothing in HOME or TMPDIR (no tokenizer cache, no hub files)
    assert sorted(p for key in ("HOME", "TMPDIR") for p in Path(private[key]).rglob("*")) == []


def test_a_failed_request_ratio_over_the_threshold_fails_the_job(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str]
) -> None:
    """Every request names a model the frontend does not serve (404): the benchmark fails,
    so does the job, and result.json says why."""
    options = {
        "isl": 16,
        "osl": 4,
        "concurrencies": [2],
        "num_prompts_mult": 2,
        "num_warmup_mult": 0,
        "model": "no-such-model",
        "max_failed_ratio": 0.5,
    }
    run = srt_jobs.run(
        recipe(tiny_model, {"type": "sa-bench", "options": options}), env=private, timeout=240
    )
    assert run.code != 0
    result = run.result()
    assert result["status"] == "failed"
    (r,) = result["benchmark"]["runs"]
    assert (r["failed"], r["completed"], r["failed_ratio"]) == (4, 0, 1.0)
    assert any("HTTP 404" in e for e in r["errors"]), r["errors"]
    assert result["benchmark"]["passed"] is False


@pytest.mark.parametrize(("suite", "items"), [("gsm8k", 8), ("gpqa", 5)])
def test_accuracy_suites_ask_every_question_of_the_builtin_sample(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str], suite: str, items: int
) -> None:
    """The mocker answers with token ids outside the vocabulary (no text), so the score is
    not the point: every question was asked, answered and graded."""
    options = {"max_tokens": 8, "num_threads": 4, "repeat": 2}
    run = srt_jobs.run(
        recipe(tiny_model, {"type": suite, "options": options}), env=private, timeout=240
    )
    assert run.code == 0, run.stderr
    bench = run.result()["benchmark"]
    assert bench["type"] == suite and bench["dataset"] == f"built-in {suite} sample"
    assert bench["questions"] == items
    assert bench["requests"] == bench["answered"] == 2 * items
    assert bench["failed"] == 0
    assert 0 <= bench["correct"] <= bench["requests"]
    assert bench["accuracy"] == bench["correct"] / bench["requests"]
    assert bench["latency_ms"]["p50"] > 0
