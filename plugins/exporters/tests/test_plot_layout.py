"""The plot's figure model without a job: phase labels of a short job (every phase in its
first second) and of a long one, the axes of percentages, the recipe-derived process
groups and scrape interval. The runtime test (test_plot_runtime.py) draws a real job."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("matplotlib")

from srt_exporters.implied import slurm_seconds
from srt_exporters.jobgroups import cmdline_pattern
from srt_exporters.plot import Panel, _pyplot, figure
from srt_exporters.prometheus import PROCESS_SCRAPE_FLOOR, PROCESS_TARGETS, config_text
from srt_exporters.summary import Window
from srt_services.extend import Plan

T0 = 1_700_000_000.0


def boxes_overlap(fig: Any, texts: list[Any]) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    found = []
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer)):
                found.append((a.get_text(), b.get_text()))
    return found


def phase_texts(fig: Any) -> list[Any]:
    return list(fig.axes[0].texts)


def draw(marks: list[tuple[float, str]], span: float, panels: list[Panel]) -> Any:
    plt = _pyplot()
    w = Window(start=T0, end=T0 + span, step=1.0)
    fig = figure(plt, panels, marks, "a title long enough to reach the labels (j-123)", w)
    fig.canvas.draw()
    return fig


CPU = Panel(
    "CPU busy per node", "%", [("node0", [(T0 + i, 99.9 + (i % 2) * 0.1) for i in range(30)])]
)
CORES = Panel("CPU per process group", "cores", [("sidecar", [(T0 + i, 0.01) for i in range(30)])])
SHORT = [
    (T0 + 0.01, "infra"),
    (T0 + 0.05, "services"),
    (T0 + 0.2, "workers"),
    (T0 + 0.4, "frontend"),
    (T0 + 0.6, "benchmark"),
    (T0 + 0.61, "serving"),
    (T0 + 29.5, "stop"),
]


def test_a_short_jobs_phase_labels_overlap_neither_each_other_nor_the_titles() -> None:
    fig = draw(SHORT, 30, [CPU, CORES])
    texts = phase_texts(fig)
    assert sorted(t.get_text().split()[0] for t in texts) == sorted(m for _, m in SHORT)
    titles = (
        [fig._suptitle]
        + [ax.title for ax in fig.axes[1:]]
        + [ax._left_title for ax in fig.axes[1:]]
    )
    assert boxes_overlap(fig, texts + [t for t in titles if t.get_text()]) == []
    renderer = fig.canvas.get_renderer()
    figbox = fig.bbox
    for t in texts:  # every label is inside the figure, not cut off
        box = t.get_window_extent(renderer)
        assert figbox.x0 <= box.x0 and box.x1 <= figbox.x1, t.get_text()


@settings(deadline=None, max_examples=40)  # drawing takes a renderer's time, not ours
@given(
    st.lists(
        st.tuples(
            st.floats(0, 3600),
            st.sampled_from(["infra", "workers", "serving", "a-long-phase-name"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_labels_never_overlap_wherever_the_marks_fall(marks: list[tuple[float, str]]) -> None:
    fig = draw([(T0 + t, m) for t, m in marks], 3600, [CORES])
    try:
        assert boxes_overlap(fig, [*phase_texts(fig), fig._suptitle]) == []
    finally:
        _pyplot().close(fig)


def test_percentages_are_drawn_from_zero_to_a_hundred_and_the_rest_from_zero() -> None:
    fig = draw(SHORT, 30, [CPU, CORES])
    assert fig.axes[1].get_ylim() == (0.0, 100.0)
    bottom, top = fig.axes[2].get_ylim()
    assert bottom == 0.0 and top >= 0.01


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("10:30", 630),
        ("02:00:00", 7200),
        ("1-0", 86400),
        ("1-02:03", 93780),
        ("1-0:0:5", 86405),
        ("UNLIMITED", None),
    ],
)
def test_slurm_time_limits_are_read_in_every_sbatch_form(text: str, seconds: int | None) -> None:
    assert slurm_seconds(text) == seconds


@given(st.text(max_size=30))
def test_any_slurm_time_text_reads_as_seconds_or_none_never_an_error(text: str) -> None:
    seconds = slurm_seconds(text)
    assert seconds is None or seconds >= 0


@given(st.integers(0, 99), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_every_sbatch_form_of_a_limit_reads_back(d: int, h: int, m: int, sec: int) -> None:
    assert slurm_seconds(f"{d}-{h:02}:{m:02}:{sec:02}") == d * 86400 + h * 3600 + m * 60 + sec
    assert slurm_seconds(f"{h}:{m:02}:{sec:02}") == h * 3600 + m * 60 + sec
    assert slurm_seconds(f"{m}:{sec:02}") == m * 60 + sec


def test_the_scrape_interval_follows_the_time_limit(srt_plan: Callable[..., Plan]) -> None:
    def interval(slurm: str) -> int:
        plan = srt_plan(
            f"schema: 2\nname: x\n{slurm}services: [{{name: s, command: [sleep, '9']}}]\n"
        )
        return int(plan.unit("prometheus").options["scrape_interval_seconds"])

    assert interval("") == 1  # no limit: a try-out, every second
    assert interval("slurm: {time: '00:10:00'}\n") == 1
    assert interval("slurm: {time: '01:00:00'}\n") == 5
    assert interval("slurm: {time: '2-00:00:00'}\n") == 15


def test_the_jobs_services_and_roles_get_process_groups_named_after_them(
    srt_plan: Callable[..., Plan],
) -> None:
    plan = srt_plan(
        """
        schema: 2
        name: x
        resources: {gpus_per_node: 1}
        roles:
          decode: {workers: 1, command: [python3, -m, myengine, --port, "{worker_port}"]}
        frontend: {type: sglang, command: [python3, front.py]}
        services:
          - {name: side, command: [python3, side.py, "{node_ip}"]}
          - {name: unused, command: [python3, unused.py], enabled: false}
        """
    )
    groups = plan.unit("process-exporter").options["groups"]
    assert [g["name"] for g in groups] == ["side", "decode", "frontend"]
    assert re.search(groups[1]["cmdline"][0], "python3 -m myengine --port 8001")
    assert not re.search(groups[0]["cmdline"][0], "python3 front.py")


def test_a_commands_literal_words_make_its_group_and_placeholders_are_left_out() -> None:
    pattern = cmdline_pattern(["/usr/bin/python3", "srv.py", "{node_ip}", "9000", "a+b(1)"])
    assert pattern is not None
    assert re.search(pattern, "/usr/bin/python3 srv.py 127.0.0.1 9000 a+b(1)")
    assert not re.search(pattern, "/usr/bin/python3 srv.py 127.0.0.1 9001 a+b(1)")
    assert cmdline_pattern(["{x}"]) is None


def test_below_two_seconds_process_exporter_gets_a_slower_scrape_job_of_its_own() -> None:
    fast = yaml.safe_load(config_text("/j/metrics/targets.json", 1.0, None))
    main, slow = fast["scrape_configs"]
    assert fast["global"]["scrape_interval"] == "1s"
    assert main["relabel_configs"] == [
        {"source_labels": ["instance"], "regex": PROCESS_TARGETS, "action": "drop"}
    ]
    assert slow["relabel_configs"][0]["action"] == "keep"
    assert slow["scrape_interval"] == f"{PROCESS_SCRAPE_FLOOR:g}s"
    assert slow["file_sd_configs"] == main["file_sd_configs"]
    assert re.fullmatch(PROCESS_TARGETS, "process_exporter_node0")
    assert not re.fullmatch(PROCESS_TARGETS, "node_exporter_node0")
    calm = yaml.safe_load(config_text("/j/metrics/targets.json", 15.0, None))
    assert [j["job_name"] for j in calm["scrape_configs"]] == ["srt"]
    assert "relabel_configs" not in calm["scrape_configs"][0]
