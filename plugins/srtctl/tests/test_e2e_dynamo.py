"""srtctl's recipes/mocker/agg.yaml under ``srt run`` with the real Dynamo 1.6: its frontend
and mocker, the etcd and NATS srt starts (the recipe's NATS request plane), on this machine.

The recipe text is srtctl's, unchanged. The cluster config (srtslurm.yaml, which a site has
anyway) maps its model ``hf:Qwen/Qwen3-0.6B`` to a tiny local model directory this test
builds (nothing is downloaded), and the site config says the engines are installed on the
nodes (``[formats.srtctl] containers = false``: no pyxis here, and no pip install of
Dynamo 0.8.0 before each process). The recipe binds srtctl's fixed ports (frontend 8000,
etcd 2379, NATS 4222, DYN_SYSTEM_PORT 7500) on 127.0.0.1.

Its benchmark is sa-bench, from srt-benchmarks. Without that plugin the job is run through an
override file whose ``base:`` is the recipe as written and whose one variant sets
``benchmark.type: manual``; the run with sa-bench is a separate test, skipped (only it)
when srt-benchmarks is not installed. Needs Dynamo next to srt, etcd and nats-server: skips
without them, fails under ``SRT_REQUIRE_DYNAMO=1``. Every test ends with the no-survivors
check of the ``srt_jobs`` fixture.
"""

from __future__ import annotations

import importlib.util
import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from srt_services.testing import needs
from srt_services.testing.jobs import Jobs, run_srt

pytestmark = [pytest.mark.component, pytest.mark.slow]

REQUIRED_BY = "SRT_REQUIRE_DYNAMO"
RECIPE = Path(__file__).parent / "data" / "recipes" / "mocker" / "agg.yaml"
#: srtctl's served model name: the last part of the (resolved) model path
SERVED = "Qwen3-0.6B"
URL = "http://127.0.0.1:8000"


def require_dynamo() -> None:
    if importlib.util.find_spec("dynamo") is None or (
        importlib.util.find_spec("dynamo.mocker") is None
    ):
        needs.missing("needs Dynamo next to srt (tox -e dynamo installs it)", REQUIRED_BY)
    for binary in ("etcd", "nats-server"):
        if needs.venv_script(binary) is None:
            needs.missing(f"needs {binary} (apt-get install etcd-server nats-server)", REQUIRED_BY)


def has_sa_bench() -> bool:
    return any(ep.name == "benchmark.sa-bench" for ep in entry_points(group="srt.provides"))


@pytest.fixture
def site(tmp_path: Path) -> dict[str, str]:
    """The site config and cluster config a site running this recipe locally has."""
    require_dynamo()
    from srt_dynamo.tiny_model import build

    model = tmp_path / "models" / SERVED
    build(str(model), SERVED)
    cluster = tmp_path / "srtslurm.yaml"
    cluster.write_text(json.dumps({"model_paths": {"hf:Qwen/Qwen3-0.6B": str(model)}}))
    config = tmp_path / "site.toml"
    config.write_text(f'[formats.srtctl]\ncluster_config = "{cluster}"\ncontainers = false\n')
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    return {
        "SRT_SITE_CONFIG": str(config),
        "SRTSLURM_CONFIG": "",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "HF_HUB_OFFLINE": "1",
    }


def chat() -> dict[str, object]:
    import httpx  # installed with Dynamo (the dynamo tox environment)

    body = {
        "model": SERVED,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 8,
        "ignore_eos": True,
    }
    r = httpx.post(f"{URL}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    answer: dict[str, object] = r.json()
    return answer


def test_the_srtctl_mocker_recipe_serves_under_srt_run(
    srt_jobs: Jobs, site: dict[str, str]
) -> None:
    text = RECIPE.read_text()
    wrapped = "base:\n" + "".join(f"  {line}\n" for line in text.splitlines())
    wrapped += "override_serve:\n  benchmark:\n    type: manual\n"
    run = srt_jobs.start(wrapped, "--variant", "override_serve", env=site)
    run.wait_event("serving", timeout=180)
    usage = chat()["usage"]
    assert isinstance(usage, dict) and usage["completion_tokens"] == 8, usage
    plan = json.loads(Path(run.job_dir, "plan.json").read_text())
    assert plan["job_name"] == "smoke-test-agg_serve"
    units = {u["name"]: u for u in plan["units"]}
    assert {"etcd", "nats", "agg", "frontend"} <= units.keys()
    worker = units["agg"]["instances"][0]
    assert worker["argv"][1:3] == ["-m", "dynamo.mocker"]
    assert worker["env"]["DYN_REQUEST_PLANE"] == "nats"
    stopped = run_srt("stop", run.job_dir, env=site, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    run.wait(120)
    assert run.code == 0, run.stderr


def test_the_srtctl_mocker_recipe_runs_unchanged_with_its_sa_bench(
    srt_jobs: Jobs, site: dict[str, str]
) -> None:
    if not has_sa_bench():
        pytest.skip("the benchmark part needs srt-benchmarks (sa-bench), not installed")
    run = srt_jobs.start(RECIPE.read_text(), env=site)
    run.wait(900)
    assert run.code == 0, run.stderr
    plan = json.loads(Path(run.job_dir, "plan.json").read_text())
    bench = next(u for u in plan["units"] if u["category"] == "benchmark")["instances"][0]
    summary = json.loads(Path(bench["env"]["SRT_BENCHMARK_RESULT"]).read_text())
    # the recipe's own parameters: isl 128, osl 128, concurrencies "4"
    assert (summary["type"], summary["isl"], summary["osl"]) == ("sa-bench", 128, 128)
    assert summary["passed"] is True, summary
    assert [r["concurrency"] for r in summary["runs"]] == [4]
    assert summary["runs"][0]["completed"] > 0 and summary["runs"][0]["failed"] == 0
    result = json.loads(Path(run.job_dir, "result.json").read_text())
    assert result["status"] == "succeeded", result
