"""``srt report``'s page model and page from a synthetic job directory: the timeline's spans
and marks from events, the failed instance's log tail, and hostile names and log lines
escaped (a ``<script>`` from the job must stay text)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.app.report import build_report
from srt_services.cli.report_page import render_page
from srt_services.contracts.report import ReportSection
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.result import JobResult, write_result
from srt_services.jobdir.state import (
    InstanceState,
    InstanceStatus,
    JobState,
    OrchestratorInfo,
    write_state,
)

T0 = 1_700_000_000.0
HOSTILE = "<script>document.title='pwned'</script>"
EVIL_STEP = 'service_x"><img src=x onerror=alert(1)>'


def _inst(
    unit: str, state: InstanceStatus, restarts: int, code: int | None, log: str
) -> InstanceState:
    return InstanceState(
        unit, "node0", state, None, None, None, T0, None, restarts + 1, restarts, code, log,
        None, {},
    )  # fmt: skip


def make_job(tmp: Path) -> str:
    job = JobDir(str(tmp / "job"))
    Path(job.path, "logs").mkdir(parents=True)
    Path(job.path, "logs", "flaky.out").write_text(
        "booting\n" + HOSTILE + "\n</pre><script>alert(2)</script>\nfatal: disk & <gone>\n"
    )
    Path(job.path, "logs", "web.out").write_text("fine\n")
    cause = StopCause(StopKind("critical_service_exit"), f"critical {EVIL_STEP} exited <b>")
    write_state(
        job,
        JobState(
            1,
            "demo",
            "j1",
            "cookie",
            "local",
            "failed",
            None,
            OrchestratorInfo(1, None, "h", T0),
            {
                "service_web": _inst("web", "stopped", 0, None, "logs/web.out"),
                EVIL_STEP: _inst("x", "failed", 1, 1, "logs/flaky.out"),
            },
            cause,
            [],
        ),
    )
    events: list[tuple[float, str, dict[str, Any]]] = [
        (0.0, "job_started", {}),
        (0.1, "phase_started", {"phase": "infra"}),
        (0.2, "launched", {"step": "service_web", "attempt": 1}),
        (0.3, "launched", {"step": EVIL_STEP, "attempt": 1}),
        (1.0, "ready", {"step": "service_web", "waited": 0.8}),
        (1.5, "exited", {"step": EVIL_STEP, "code": 3, "attempt": 1}),
        (1.6, "restarting", {"step": EVIL_STEP, "delay": 0.5, "attempt": 2}),
        (2.1, "launched", {"step": EVIL_STEP, "attempt": 2}),
        (2.5, "ready", {"step": EVIL_STEP, "waited": 0.4}),
        (4.0, "exited", {"step": EVIL_STEP, "code": 1, "attempt": 2}),
        (4.0, "stop_requested", {"cause": {"kind": "critical_service_exit"}}),
        (4.5, "exited", {"step": "service_web", "code": -15, "signal": 15}),
        (5.0, "job_finished", {"code": 1}),
    ]
    with open(job.events_file, "w") as fh:
        for dt, name, fields in events:
            fh.write(json.dumps({"t": T0 + dt, "mono": dt, "event": name, **fields}) + "\n")
    write_result(job, JobResult("demo", "j1", 1, "failed", cause, T0, T0 + 5.0, []))
    return job.path


def test_the_model_has_one_row_per_instance_with_its_attempts(tmp_path: Path) -> None:
    report = build_report(make_job(tmp_path), None)
    assert report.status == "failed" and report.exit_code == 1
    assert report.duration == 5.0
    rows = {r.step: r for r in report.rows}
    assert set(rows) == {"service_web", EVIL_STEP}
    flaky = rows[EVIL_STEP]
    assert [(s.attempt, s.start, s.end, s.code) for s in flaky.spans] == [
        (1, 0.3, 1.5, 3),
        (2, 2.1, 4.0, 1),
    ]
    assert flaky.spans[0].ready is None and flaky.spans[1].ready == 2.5
    assert [m.kind for m in flaky.marks] == ["exit", "restart", "ready", "exit"]
    assert flaky.state == "failed" and flaky.restarts == 1
    web = rows["service_web"]
    assert [(s.start, s.ready, s.end, s.signal) for s in web.spans] == [(0.2, 1.0, 4.5, 15)]
    # what the teardown ended is no failure, whatever its code; the exit that caused it is
    assert [s.failed for s in flaky.spans] == [True, True] and not web.spans[0].failed
    assert [m.kind for m in report.marks] == ["phase", "stop", "end"]
    assert report.marks[1].label == f"stop: critical {EVIL_STEP} exited <b>"
    assert [t.step for t in report.tails] == [EVIL_STEP]
    assert report.tails[0].lines[-1] == "fatal: disk & <gone>"


def test_only_the_latest_run_of_a_directory_is_drawn(tmp_path: Path) -> None:
    path = make_job(tmp_path)
    events = Path(path, "events.jsonl")
    earlier = [
        {"t": T0 - 100, "mono": 0, "event": "job_started"},
        {"t": T0 - 99, "mono": 1, "event": "launched", "step": "service_web", "attempt": 1},
        {"t": T0 - 98, "mono": 2, "event": "exited", "step": "service_web", "code": 9},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in earlier) + events.read_text())
    rows = {r.step: r for r in build_report(path, None).rows}
    assert [s.start for s in rows["service_web"].spans] == [0.2]


def test_a_running_attempt_runs_to_the_end_of_the_record(tmp_path: Path) -> None:
    path = make_job(tmp_path)
    Path(path, "result.json").unlink()
    with open(Path(path, "events.jsonl"), "a") as fh:
        fh.write(json.dumps({"t": T0 + 6, "mono": 6, "event": "launched", "step": "service_web"}))
        fh.write("\n")
    report = build_report(path, None)
    last = report.rows[0].spans[-1]
    assert last.open and last.start == 6.0 and last.end == report.duration == 6.0


class _Page(HTMLParser):
    """What a browser would build: the scripts' text, the elements and their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def test_hostile_names_and_log_lines_stay_text(tmp_path: Path) -> None:
    report = build_report(make_job(tmp_path), None)
    report.sections = [
        ("plugin-z", ReportSection("Z <i>", "<p id='z'>ok</p>")),
        ("p2", "boom <x>"),
    ]
    page = render_page(report)
    parsed = _Page()
    parsed.feed(page)
    # one script: the page's own, with its nonce; the policy runs nothing else
    assert len(parsed.scripts) == 1 and "pwned" not in parsed.scripts[0]
    scripts = [a for t, a in parsed.tags if t == "script"]
    nonce = scripts[0]["nonce"]
    policy = [
        a["content"] for t, a in parsed.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(policy) == 1 and policy[0] is not None
    assert nonce and f"script-src 'nonce-{nonce}'" in policy[0]
    assert "default-src 'none'" in policy[0]
    # no element came from the job: no <img>, no <b>, no element with an event handler
    assert not [t for t, _ in parsed.tags if t in {"img", "b", "gone", "i", "x"}]
    assert not [a for _, a in parsed.tags if any(k.startswith("on") for k in a)]
    assert HOSTILE not in page and "&lt;script&gt;document.title=&#x27;pwned&#x27;" in page
    assert "fatal: disk &amp; &lt;gone&gt;" in page
    # the hostile step is an attribute value, whole
    rows = [a for t, a in parsed.tags if t == "g" and a.get("class") == "row"]
    assert {a["data-step"] for a in rows} == {"service_web", EVIL_STEP}
    # a plugin's HTML goes in as it is; its title and a failure's text are escaped
    assert "<p id='z'>ok</p>" in page and "Z &lt;i&gt;" in page and "boom &lt;x&gt;" in page


def test_nothing_is_fetched_from_anywhere(tmp_path: Path) -> None:
    page = render_page(build_report(make_job(tmp_path), None))
    # no URL that a browser would load: only the SVG namespace, which is a name
    urls = set(re.findall(r"(?:https?:)?//[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(link|iframe|object|embed)\b", page)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(-1e12, 1e12, allow_nan=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["kind", "message"]), st.text(max_size=10), max_size=2),
)
_EVENT = st.fixed_dictionaries(
    {
        "event": st.sampled_from(
            [
                "launched",
                "ready",
                "exited",
                "restarting",
                "unhealthy",
                "unavailable",
                "phase_started",
                "stop_requested",
                "job_finished",
                "ready_timeout",
                "other",
            ]
        ),
        "step": st.sampled_from(["service_web", EVIL_STEP, "nosuch", 7]),
    },
    optional=dict.fromkeys(
        ("t", "attempt", "code", "signal", "delay", "waited", "reason", "cause", "phase"), _VALUES
    ),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_EVENT, max_size=25))
def test_any_events_file_gives_a_page(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    """Events are a log for people, edited or cut by a crash: whatever their fields hold,
    the report is drawn, and a span never ends before it starts."""
    path = make_job(tmp_path / str(len(list(tmp_path.iterdir()))))
    Path(path, "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    report = build_report(path, None)
    for row in report.rows:
        assert all(s.end >= s.start for s in row.spans)
    page = render_page(report)
    assert page.count("<script") == 1
