"""Issue 18, items 6, 7 and 8: log probes that follow a ``path:`` read only what the current
attempt wrote; probe paths render their placeholders before anything else; a pattern can
never hold up the orchestrator.

Fault-matrix IDs: F10/F11 (stale content, rotation, split writes) where a case matches;
the new IDs of docs/fault-matrix.md (H12-H14) in the docstrings. Every runtime test ends
with the no-survivors check (the ``jobs`` fixture).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services.errors import RecipeInvalid
from srt_services.probes.log import MAX_LINE, LineScanner, LogProbe
from srt_services.supervise.probing import InotifyHub, Target, file_start, probe_starts
from srt_services.testing import kit
from srt_services.testing.jobs import Jobs, events_of

# ------------------------------------------------------------------ item 6: where an attempt began


def _target(config: dict[str, Any], starts: dict[str, tuple[int | None, int]]) -> Target:
    return Target(
        config=config,
        log_path="/nonexistent/own.out",
        log_offset=0,
        job_dir="/tmp",
        started_wall=time.time(),
        interval=0.5,
        hub=None,
        owner_check=lambda port: True,
        starts=starts,
    )


def test_F10_H12_a_path_probe_reads_from_where_the_attempt_began(tmp_path: Path) -> None:
    """H12: the file a ``path:`` probe follows already holds the ready line of an earlier
    attempt; the offset taken at launch keeps it from counting."""
    log = tmp_path / "ext.log"
    log.write_text("attempt 1: READY\n")
    starts = {str(log): file_start(str(log))}
    target = _target({"pattern": "READY", "path": str(log)}, starts)
    assert asyncio.run(LogProbe().check(target, 1.0)).ok is False
    with log.open("a") as fh:
        fh.write("attempt 2: READY\n")
    assert asyncio.run(LogProbe().check(target, 1.0)).ok is True


def test_F11_H12_a_file_replaced_after_the_launch_is_read_from_its_start(tmp_path: Path) -> None:
    """H12: rotation between the launch and the first read: the new file (another inode) is
    all this attempt's, even where it is longer than the recorded offset."""
    log = tmp_path / "ext.log"
    log.write_text("old: READY\n")
    starts = {str(log): file_start(str(log))}
    os.rename(log, tmp_path / "ext.log.1")
    log.write_text("a new file, longer than the old one, and then READY\n")
    target = _target({"pattern": "READY", "path": str(log)}, starts)
    assert asyncio.run(LogProbe().check(target, 1.0)).ok is True


def test_H12_a_file_that_did_not_exist_at_launch_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    starts = probe_starts([])
    assert starts == {}
    target = _target({"pattern": "READY", "path": str(log)}, {str(log): file_start(str(log))})
    assert target.start_of(str(log)) == (None, 0)
    log.write_text("READY\n")
    assert asyncio.run(LogProbe().check(target, 1.0)).ok is True


def test_F10_H12_a_restarted_attempt_ignores_the_ready_line_of_the_last_one(
    jobs: Jobs, tmp_path: Path
) -> None:
    """H12 end to end: a service whose readiness follows a file of its own (``path:``) is
    restarted; the ready line attempt 1 left in that file must not make attempt 2 ready."""
    marker = tmp_path / "attempts"
    script = (
        "import os,sys,time\n"
        f"m={str(marker)!r}\n"
        "n=len(open(m).read()) if os.path.exists(m) else 0\n"
        "open(m,'a').write('x')\n"
        "log=open(sys.argv[1],'a')\n"
        "if n==0:\n"
        "    log.write('READY attempt 1\\n'); log.flush(); time.sleep(0.5); sys.exit(3)\n"
        "time.sleep(1.5); log.write('READY attempt 2\\n'); log.flush(); time.sleep(1000)\n"
    )
    run = jobs.start(
        f"""
        schema: 2
        observability:
          metrics: false
        name: h12
        services:
          - name: svc
            command: [{sys.executable}, -c, {json.dumps(script)}, "{{log_dir}}/svc-own.log"]
            readiness: {{log: {{pattern: READY, path: "{{log_dir}}/svc-own.log"}}}}
            critical: false
            restart: {{backoff_initial_seconds: 0.1, max_failures: 3, jitter: 0}}
            stop_grace_seconds: 1
        """
    )
    run.wait_event("ready", step="service_svc", attempt=2, timeout=30)
    readies = events_of(run, "ready", step="service_svc")
    assert [e["attempt"] for e in readies] == [1, 2]
    assert readies[1]["waited"] >= 1.4, "attempt 1's READY made attempt 2 ready"
    run.signal(signal.SIGTERM)
    assert run.wait(30).code == 143


# ------------------------------------------------------------------ item 7: probe paths


def _plan(tmp_path: Path, text: str, job_dir: str = "<job_dir>") -> Any:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    return kit.plan(kit.isolated_plugins(), recipe, local=True, job_dir=job_dir)


def _probe_recipe(probe: str) -> str:
    return (
        "schema: 2\nname: h13\nservices:\n  - name: a\n    command: [sleep, '9']\n"
        f"    readiness: {{{probe}}}\n"
    )


@pytest.mark.parametrize(
    ("written", "planned"),
    [
        ("{job_dir}/ready", "{root}/ready"),
        ("{log_dir}/x.out", "{root}/logs/x.out"),
        ("{work_dir}/up", "{root}/work/service_a/up"),
        ("ready", "{root}/ready"),
        ("sub/../ready", "{root}/ready"),
        ("/var/tmp/elsewhere", "/var/tmp/elsewhere"),
        ("{local_dir}/sock", "{local}/service_a/sock"),
        ("{job_name}.ready", "{root}/h13.ready"),
    ],
)
@pytest.mark.parametrize("probe", ["file", "log"])
@pytest.mark.parametrize("root", ["<job_dir>", "/srv/jobs/j1"])
def test_H13_placeholders_render_before_the_path_is_judged_relative(
    tmp_path: Path, written: str, planned: str, probe: str, root: str
) -> None:
    """H13: ``{job_dir}/x`` was glued under the job directory a second time
    (``<job_dir>/<job_dir>/x``); now every placeholder renders first."""
    config = f'path: "{written}"' + (", pattern: up" if probe == "log" else "")
    plan = _plan(tmp_path, _probe_recipe(f"{probe}: {{{config}}}"), root)
    inst = plan.unit("a").instances[0]
    assert inst.readiness is not None
    want = planned.format(root=root, local=plan.local_dir)
    assert inst.readiness.config["path"] == want
    assert want in inst.readiness.describe


@pytest.mark.parametrize("written", ["../outside", "a/../../outside", "{job_name}/../../x", ".."])
def test_H13_a_relative_path_leaving_the_job_directory_is_refused(
    tmp_path: Path, written: str
) -> None:
    """H13: a path outside the job directory must be absolute and explicit."""
    with pytest.raises(RecipeInvalid) as err:
        _plan(tmp_path, _probe_recipe(f'file: {{path: "{written}"}}'))
    text = str(err.value)
    assert "services[a].readiness.file.path" in text
    assert "leads out of it" in text
    assert ":6:" in text, "the problem names the YAML line"


def test_H13_an_http_path_renders_its_placeholders_and_stays_one_line(tmp_path: Path) -> None:
    """H13 neighbour: the checks allowed placeholders in an http probe's path, but the URL
    kept them verbatim; a rendered value can no longer break the request line either."""
    plan = _plan(tmp_path, _probe_recipe('http: {port: 8123, path: "/{job_name}/health x"}'))
    inst = plan.unit("a").instances[0]
    assert inst.readiness is not None
    assert inst.readiness.config["url"].endswith(":8123/h13/health%20x")


def test_H13_dry_run_shows_the_final_path(tmp_path: Path) -> None:
    import subprocess

    recipe = tmp_path / "r.yaml"
    recipe.write_text(_probe_recipe('file: {path: "{job_dir}/ready"}'))
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", str(recipe)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SRT_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert "non-empty file <job_dir>/ready" in out.stdout
    assert "<job_dir>/<job_dir>" not in out.stdout and "//" not in out.stdout


def test_H13_a_file_probe_on_job_dir_placeholder_becomes_ready(jobs: Jobs) -> None:
    """H13 end to end: before the fix this probe watched a path that could never exist."""
    run = jobs.start(
        """
        schema: 2
        observability:
          metrics: false
        name: h13run
        services:
          - name: w
            command: [bash, -c, 'sleep 0.3; echo up > "$SRT_JOB_DIR/ready.flag"; sleep 1000']
            readiness: {file: {path: "{job_dir}/ready.flag"}, timeout_seconds: 20}
        """
    )
    run.wait_event("serving", timeout=30)
    run.signal(signal.SIGTERM)
    assert run.wait(30).code == 143


# ------------------------------------------------------------------ item 8: bounded matching


def test_H14_progress_output_rewritten_with_cr_is_so_many_short_lines(tmp_path: Path) -> None:
    """H14: a 64 KB terminal line rewritten with ``\\r`` (a progress bar) is split at each
    ``\\r``; the ready text after it is found, and no search ever sees the whole line."""
    log = tmp_path / "x.out"
    progress = b"".join(b"\rloading %5d / 100000" % i for i in range(0, 100000, 30))
    assert len(progress) > MAX_LINE
    log.write_bytes(progress)
    scanner = LineScanner(str(log), 0, r"^.*server (is )?ready")
    seen: list[int] = []
    original = scanner._search

    def spy(line: bytes) -> bool:
        seen.append(len(line))
        return original(line)

    scanner._search = spy  # type: ignore[method-assign]
    assert scanner.poll() is False
    with log.open("ab") as fh:
        fh.write(b"\rserver ready")
    assert scanner.poll() is True
    assert max(seen) < 64, "every search saw one rewrite of the line, not the whole line"


def test_H14_a_catastrophic_pattern_gives_up_on_a_line_and_says_so(tmp_path: Path) -> None:
    """H14: ``(a|aa)+$`` on a line of 40 ``a`` and one ``b`` takes minutes with ``re``."""
    log = tmp_path / "x.out"
    log.write_bytes(b"a" * 40 + b"b\n")
    scanner = LineScanner(str(log), 0, r"(a|aa)+$")
    t0 = time.monotonic()
    assert scanner.poll() is False
    assert time.monotonic() - t0 < 30  # a hang guard, not a timing target
    assert scanner.slow is not None and "backtracks" in scanner.slow


def test_H14_a_long_log_is_read_in_turns_that_give_the_loop_a_chance(tmp_path: Path) -> None:
    """H14: a 50 MB backlog is read a bounded piece per poll; between pieces the probe
    yields, so another task (a signal handler, the probe's timeout) runs meanwhile."""
    log = tmp_path / "x.out"
    with log.open("wb") as fh:
        line = b"x" * 99 + b"\n"
        fh.write(line * (50 * 10_000))
        fh.write(b"READY\n")

    async def scenario() -> int:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        hub = InotifyHub(asyncio.get_running_loop())
        try:
            target = _target({"pattern": "READY", "path": None}, {})
            target.log_path = str(log)
            target.hub = hub
            tick = asyncio.ensure_future(ticker())
            await asyncio.wait_for(LogProbe().wait_ready(target, 1.0), 60)
            done = True
            await tick
        finally:
            hub.close()
        return ticks

    assert asyncio.run(scenario()) >= 10


def test_H14_the_probe_timeout_and_sigint_work_with_a_catastrophic_pattern(jobs: Jobs) -> None:
    """H14 end to end: a service keeps writing the lines the pattern chokes on; the
    readiness timeout still fires (with the pattern's trouble as the last error), and a
    second job is stopped by SIGINT while it waits."""
    recipe = r"""
        schema: 2
        observability:
          metrics: false
        name: h14
        services:
          - name: chatty
            command: [bash, -c, 'while true; do printf "%s\n" aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab; sleep 0.05; done']
            readiness: {log: {pattern: "(a|aa)+$"}, timeout_seconds: TIMEOUT}
            stop_grace_seconds: 1
        """
    t0 = time.monotonic()
    timed_out = jobs.run(recipe.replace("TIMEOUT", "3"), timeout=120)
    assert timed_out.code == 1
    cause = timed_out.result()["cause"]
    assert cause["kind"] == "readiness_timeout"
    assert "backtracks" in cause["message"]
    assert time.monotonic() - t0 < 90  # the timeout fired: the loop was never held

    waiting = jobs.start(recipe.replace("TIMEOUT", "600"))
    waiting.wait_event("waiting", step="service_chatty")
    time.sleep(1.0)
    waiting.signal(signal.SIGINT)
    assert waiting.wait(60).code == 130
    assert waiting.result()["cause"]["kind"] == "signal"
