"""``srt ps`` text: durations, and the table in a pipe and narrowed."""

from __future__ import annotations

from srt_services.cli.job_list_views import duration_text, jobs_text


def test_durations_read_at_a_glance() -> None:
    assert [duration_text(s) for s in (None, 0, 42.9, 60, 723, 3600, 11230, 86400 * 2 + 3600 * 4)] == [
        "-", "0s", "42s", "1m00s", "12m03s", "1h00m", "3h07m", "2d04h",
    ]  # fmt: skip


def _data() -> dict[str, object]:
    row = {
        "job_dir": "/jobs/a-rather-long-job-directory-name-20240101-120000-abcd",
        "job": "a-rather-long-recipe-name",
        "state": "failed",
        "started": 0.0,
        "duration": 75.0,
        "exit_code": 143,
        "nodes": 4,
        "slurm_job_id": "123456",
    }
    return {"root": "/jobs", "jobs": [row]}


def test_a_pipe_gets_every_column_and_a_terminal_a_fitted_table() -> None:
    full = jobs_text(_data(), None).splitlines()
    assert full[0].split() == [
        "JOB",
        "NAME",
        "STATE",
        "STARTED",
        "DURATION",
        "EXIT",
        "NODES",
        "SLURM",
    ]
    cells = full[1].split("  ")
    assert "signal 15" in full[1] and "1m15s" in full[1] and cells[-1] == "123456"
    narrow = jobs_text(_data(), 60).splitlines()
    assert all(len(line) <= 60 for line in narrow)
    assert "NAME" not in narrow[0] and "STATE" in narrow[0]
    assert "(narrow terminal:" in "\n".join(narrow) and narrow[-1].endswith("every field)")
