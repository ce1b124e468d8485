"""``examples/dynamo-mocker.yaml`` as a user runs it: the recipe unchanged, the tiny model
built beside it with ``python -m srt_dynamo.tiny_model``, Dynamo's frontend and two mocker
workers over the NATS srt starts. The example pins the default ports (8000, 2379, 4222...),
which is what a user sees; CI runs this environment alone on the machine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dynamo_stack import require_dynamo
from srt_services.testing.jobs import Jobs

pytestmark = [pytest.mark.component, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dynamo-mocker.yaml"


def test_the_dynamo_example_runs_as_its_header_says(srt_jobs: Jobs, tmp_path: Path) -> None:
    require_dynamo()
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    built = subprocess.run(
        [sys.executable, "-m", "srt_dynamo.tiny_model", str(srt_jobs.tmp / "models" / "tiny")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    env = {"HOME": str(home), "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1"}
    run = srt_jobs.start(EXAMPLE.read_text(), env=env).wait(300)
    assert run.code == 0, run.stdout + run.stderr
    assert "16 of 16 chat completions answered with 16 tokens" in run.log("benchmark")
    plan_units = {e["step"] for e in run.events() if e.get("event") == "ready" and "step" in e}
    assert {"service_etcd", "service_nats", "frontend"} <= plan_units, plan_units
    assert sorted(p.name for p in tmp.iterdir()) == []
    shutil.rmtree(home)
