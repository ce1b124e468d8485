"""``env_passthrough``: the variables of the shell that runs srt which a job's processes
inherit, beside the built-in allow-list and the site's list. Without it ``HF_TOKEN``,
``NCCL_*`` and ``LD_LIBRARY_PATH`` are dropped (what users migrating from srtctl's
``--export=ALL`` lose); with it they arrive, names and ``PREFIX_*`` patterns alike."""

from __future__ import annotations

import json
from pathlib import Path

from srt_services.testing.jobs import Jobs

SHELL = {
    "HF_TOKEN": "hf_secret",
    "NCCL_DEBUG": "INFO",
    "NCCL_IB_HCA": "mlx5_0",
    "LD_LIBRARY_PATH": "/opt/cuda/lib64",
    "LD_PRELOAD": "/nonexistent/preload.so",
    "OTHER_THING": "x",
}


def recipe(out: Path, passthrough: str) -> str:
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
    return f"""\
schema: 2
name: passthrough
frontend: {{type: none}}
observability: {{metrics: false}}
{passthrough}
benchmark: {{type: command, command: [python3, -c, "{dump}", "{out}"]}}
"""


def seen(jobs: Jobs, tmp_path: Path, passthrough: str) -> dict[str, str]:
    out = tmp_path / f"env{len(jobs.runs)}.json"
    run = jobs.run(recipe(out, passthrough), env=SHELL, timeout=90)
    assert run.proc.returncode == 0, run.proc.stderr.read() if run.proc.stderr else ""
    env: dict[str, str] = json.loads(out.read_text())
    return env


def test_the_default_drops_the_usual_variables(srt_jobs: Jobs, tmp_path: Path) -> None:
    env = seen(srt_jobs, tmp_path, "")
    assert not set(SHELL) & set(env)


def test_names_and_patterns_pass_through(srt_jobs: Jobs, tmp_path: Path) -> None:
    env = seen(srt_jobs, tmp_path, "env_passthrough: [HF_TOKEN, 'NCCL_*', LD_LIBRARY_PATH, 'LD_*']")
    assert {k: env.get(k) for k in SHELL} == {
        "HF_TOKEN": "hf_secret",
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5_0",
        "LD_LIBRARY_PATH": "/opt/cuda/lib64",
        "LD_PRELOAD": None,  # never by a pattern
        "OTHER_THING": None,
    }
