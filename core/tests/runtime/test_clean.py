"""``srt rm`` and ``srt prune`` on real job directories (finished, running, not a job),
``--force`` stopping a running job first, and the shell completion of job and service
names under the job root."""

from __future__ import annotations

import os
import time
from pathlib import Path

from srt_services import procfs
from srt_services.testing.jobs import Jobs
from srt_services.testing.jobs import run_srt as srt

DONE = """
schema: 2
observability:
  metrics: false
name: done
services:
  - name: end
    terminal: true
    command: [bash, -c, "exit 0"]
"""
SERVING = """
schema: 2
observability:
  metrics: false
name: serving
services:
  - name: svc
    command: [sleep, "1000"]
"""


def complete(words: str, root: Path) -> list[str]:
    """What bash completion offers for ``words`` (the last word being completed)."""
    env = {
        "_SRT_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
        "SRT_JOB_ROOT": str(root),
    }
    out = srt(env=env)
    return [line.split(",", 1)[1] for line in out.stdout.splitlines() if line.startswith("plain,")]


def test_rm_and_prune_remove_only_jobs_that_are_over(jobs: Jobs, tmp_path: Path) -> None:
    root = tmp_path / "root"
    done = jobs.run(DONE, job_dir=str(root / "a-done"))
    assert done.code == 0, done.stderr
    old = jobs.run(DONE, job_dir=str(root / "b-old"))
    assert old.code == 0, old.stderr
    running = jobs.start(SERVING, job_dir=str(root / "c-serving"))
    running.wait_event("serving")
    svc = running.state()["instances"]["service_svc"]["pid"]
    (root / "not-a-job").mkdir()
    (root / "not-a-job" / "precious").write_text("x")
    env = {"SRT_JOB_ROOT": str(root)}

    # completion: job names under the root, then the named job's services and steps
    assert complete("srt status ", root) == ["c-serving", "b-old", "a-done"]
    assert complete("srt restart c-", root) == ["c-serving"]
    assert complete("srt restart c-serving s", root) == ["svc", "service_svc"]

    by_name = srt("rm", "a-done", env=env)
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == f"removed {root / 'a-done'}\n"
    assert not (root / "a-done").exists()

    refused = srt("rm", str(root / "c-serving"), str(root / "not-a-job"), env=env)
    assert refused.returncode == 1
    assert (
        f"srt rm: {root / 'c-serving'}: its orchestrator (pid {running.proc.pid}) is running:"
        " `srt stop` it first, or --force" in refused.stderr
    )
    assert "not-a-job is not an srt job directory" in refused.stderr
    assert (root / "c-serving").is_dir() and (root / "not-a-job" / "precious").exists()
    assert procfs.alive(svc)

    nothing = srt("prune", "--older-than", "1h", env=env)
    assert nothing.returncode == 0 and nothing.stdout == "", nothing
    time.sleep(1.2)
    would = srt("prune", "--older-than", "1s", "--dry-run", env=env)
    assert would.stdout == f"would remove {root / 'b-old'}\n", would
    assert (root / "b-old").exists()
    pruned = srt("prune", "--older-than", "1s", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout == f"removed {root / 'b-old'}\n"
    assert f"kept {root / 'c-serving'}: its orchestrator (pid {running.proc.pid}) is running" in (
        pruned.stderr
    )
    assert not (root / "b-old").exists() and (root / "c-serving").exists()
    bad = srt("prune", "--older-than", "soon", env=env)
    assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr

    forced = srt("rm", "--force", "c-serving", env=env, timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert "is running: stopping it" in forced.stderr
    assert not (root / "c-serving").exists()
    running.wait(30)
    assert not procfs.alive(svc) and not procfs.alive(running.proc.pid)
    assert sorted(os.listdir(root)) == ["not-a-job"]
