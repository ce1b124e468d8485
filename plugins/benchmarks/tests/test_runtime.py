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


def run_bench(
    jobs: Jobs, model: Path, env: dict[str, str], kind: str, options: dict[str, Any]
) -> Any:
    """The benchmark under ``srt run`` on the mocker job."""
    return jobs.run(recipe(model, {"type": kind, "options": options}), env=env, timeout=240)


def benchmark_log(run: Any) -> str:
    return "".join(p.read_text() for p in Path(run.job_dir, "logs").glob("*benchmark*"))


def _check_run(r: dict[str, Any], requests: int) -> None:
    assert r["requests"] == r["completed"] == requests and r["failed"] == 0
    assert r["request_throughput"] > 0 and r["output_throughput"] > 0
    for metric in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
        stats = r[metric]
        assert 0 < stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"], (metric, stats)
    assert 0 <= r["good_requests"] <= r["completed"]


def test_mooncake_router_replays_the_synthetic_trace(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str]
) -> None:
    """srtctl's recipe keys, with no trace_file: the trace srt-benchmarks generates, sent at
    its timestamps; every request answered with exactly its output length."""
    from srt_benchmarks.trace import synthetic_trace

    options = {
        "mooncake_workload": "conversation",
        "ttft_threshold_ms": 2000,
        "itl_threshold_ms": 25,
        "block_size": 32,
        "synthetic_requests": 12,
    }
    run = run_bench(srt_jobs, tiny_model, private, "mooncake-router", options)
    assert run.code == 0, run.stderr
    bench = run.result()["benchmark"]
    assert bench["type"] == "mooncake-router" and bench["passed"] is True
    assert bench["mooncake_workload"] == "conversation"
    assert bench["trace"].startswith("synthetic") and bench["trace_requests"] == 12
    trace = synthetic_trace(12, 32, 0)
    assert bench["trace_span_s"] == trace[-1].timestamp / 1000
    (r,) = bench["runs"]
    _check_run(r, 12)
    assert r["concurrency"] is None  # a fixed schedule: no bound
    assert r["output_tokens"] == sum(x.output_length for x in trace)
    # the replay took at least the trace's span: requests waited for their timestamps
    assert r["duration_s"] >= bench["trace_span_s"]
    assert r["ttft_threshold_ms"] == 2000 and r["itl_threshold_ms"] == 25


def test_trace_replay_replays_a_local_trace_per_concurrency(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str], tmp_path: Path
) -> None:
    lines = [
        {"timestamp": 0, "input_length": 40, "output_length": 6, "hash_ids": [1, 2]},
        {"timestamp": 200, "input_length": 50, "output_length": 5, "hash_ids": [1, 3]},
        {"timestamp": 400, "text_input": "hello there", "output_length": 4},
        {"timestamp": 900, "input_length": 20, "output_length": 3, "session_id": "a"},
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    options = {
        "trace_file": str(trace),
        "concurrencies": [1, 4],
        "ttft_threshold_ms": 3000,
        "itl_threshold_ms": 7,
        "aiperf_package": "aiperf>=0.7.0",
        "block_size": 32,
    }
    run = run_bench(srt_jobs, tiny_model, private, "trace-replay", options)
    assert run.code == 0, run.stderr
    bench = run.result()["benchmark"]
    assert bench["type"] == "trace-replay" and bench["passed"] is True
    assert (bench["trace"], bench["trace_requests"], bench["trace_span_s"]) == (str(trace), 4, 0.9)
    assert [r["concurrency"] for r in bench["runs"]] == [1, 4]
    for r in bench["runs"]:
        _check_run(r, 4)
        assert r["output_tokens"] == 6 + 5 + 4 + 3
        assert r["duration_s"] >= 0.9
    assert "trace-replay concurrency=4" in benchmark_log(run)


def test_a_broken_trace_fails_the_job_naming_its_line(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"input_length": 4, "output_length": 2}\n{"output_length": 2}\n')
    options = {"trace_file": str(trace), "concurrencies": [1]}
    run = run_bench(srt_jobs, tiny_model, private, "trace-replay", options)
    assert run.code != 0
    assert run.result()["status"] == "failed"
    assert f"{trace}:2" in benchmark_log(run)
