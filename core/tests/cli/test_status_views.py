"""``srt status`` text: one way to print an exit, final states, the table, --watch lines."""

from __future__ import annotations

import io
from typing import Any

import pytest
from srt_services.cli.status_views import (
    change_lines,
    exit_phrase,
    exit_text,
    shown_state,
    status_text,
    watch_lines,
)


@pytest.mark.parametrize(
    ("code", "text", "phrase"),
    [
        (None, "-", "exit -"),
        (0, "0", "exit 0"),
        (3, "3", "exit 3"),
        (-15, "signal 15", "signal 15 (SIGTERM)"),
        (143, "signal 15", "signal 15 (SIGTERM)"),
        (137, "signal 9", "signal 9 (SIGKILL)"),
        (128, "128", "exit 128"),
        (255, "255", "exit 255"),
    ],
)
def test_an_exit_reads_one_way(code: int | None, text: str, phrase: str) -> None:
    assert exit_text(code) == text
    assert exit_phrase(code) == phrase


def test_a_state_only_a_running_orchestrator_holds_is_final_once_the_job_ended() -> None:
    assert shown_state({"state": "backoff"}, ended=False) == "backoff"
    assert shown_state({"state": "backoff"}, ended=True) == "stopped (was backoff)"
    assert shown_state({"state": "failed"}, ended=True) == "failed"
    assert shown_state({"state": "starting (orchestrator gone)"}, ended=False) == (
        "starting (orchestrator gone)"
    )


def data(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "slurm": None,
        "job": "demo",
        "job_dir": "/srv/jobs/demo-20261201",
        "status": "succeeded",
        "exit_code": 0,
        "orchestrator_alive": False,
        "orchestrator_pid": 41,
        "cause": "terminal services finished",
        "instances": [
            {
                "step": "service_web",
                "node": "node0",
                "state": "stopped",
                "pid": 100,
                "running": False,
                "uptime": None,
                "restarts": 0,
                "exit_code": 143,
                "readiness": "tcp 127.0.0.1:9000",
                "log": "/srv/jobs/demo-20261201/logs/service_web.out",
                "ports": [9000, 9001],
            },
            {
                "step": "service_flaky",
                "node": "node0",
                "state": "backoff",
                "pid": 101,
                "running": False,
                "uptime": None,
                "restarts": 2,
                "exit_code": 3,
                "readiness": None,
                "log": "/srv/jobs/demo-20261201/logs/service_flaky.out",
            },
        ],
    }
    base.update(over)
    return base


def test_status_in_a_pipe_is_every_column_in_full() -> None:
    assert status_text(data(), None).splitlines() == [
        "job demo: succeeded (exit 0); orchestrator pid 41 not running",
        "cause: terminal services finished",
        "STEP           NODE   STATE                  PID  PORTS      UPTIME  RESTARTS  EXIT     "
        "  READINESS           LOG",
        "service_web    node0  stopped                100  9000,9001  -       0         signal 15"
        "  tcp 127.0.0.1:9000  /srv/jobs/demo-20261201/logs/service_web.out",
        "service_flaky  node0  stopped (was backoff)  101  -          -       2         3        "
        "  -"
        "                   /srv/jobs/demo-20261201/logs/service_flaky.out",
    ]


@pytest.mark.parametrize("width", [50, 60, 80, 100, 120])
def test_status_on_a_narrow_terminal_fits_and_keeps_the_essentials(width: int) -> None:
    lines = status_text(data(), width).splitlines()
    assert all(len(line) <= width for line in lines), lines
    table = lines[lines.index(next(line for line in lines if line.startswith("STEP"))) :]
    assert table[1].startswith("service_web ")
    assert " stopped " in table[1]
    assert "signal 15" in table[1]
    assert "stopped (was backoff)" in table[2] or width < 80
    if width < 120:  # something had to give, and the note says what
        assert any(line.startswith("(narrow terminal:") for line in table)


def test_a_live_instance_whose_process_is_gone_is_marked() -> None:
    live = data(status="running", exit_code=None, orchestrator_alive=True, cause=None)
    live["instances"][0].update(state="ready", exit_code=None)
    text = status_text(live, None)
    assert "service_web    node0  ready    100 (gone)" in text
    assert "orchestrator pid 41 running" in text


def test_watch_in_a_pipe_prints_a_line_per_change() -> None:
    running = data(status="running", exit_code=None, orchestrator_alive=True, cause=None)
    running["instances"][0].update(state="ready", exit_code=None, running=True, uptime=1.0)
    lines, seen = change_lines({}, running, "12:00:00")
    assert lines == [
        "12:00:00 service_web: ready, pid 100",
        "12:00:00 service_flaky: backoff, pid 101, exit 3, restarts 2",
        "12:00:00 job demo: running",
    ]
    running["instances"][0]["uptime"] = 2.0  # uptime alone is not a change
    assert change_lines(seen, running, "12:00:01")[0] == []
    ended = data()
    lines, _ = change_lines(seen, ended, "12:00:02")
    assert lines == [
        "12:00:02 service_web: stopped, pid 100, signal 15 (SIGTERM)",
        "12:00:02 service_flaky: stopped (was backoff), pid 101, exit 3, restarts 2",
        "12:00:02 job demo: succeeded, exit 0, cause: terminal services finished",
    ]
    # The loop ends by itself once the orchestrator is gone.
    reads = iter([running, ended])
    out = io.StringIO()
    watch_lines(lambda: next(reads), out, period=0)
    assert out.getvalue().count("\n") == 6
