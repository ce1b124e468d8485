"""Fixtures for runtime tests: run real jobs, then prove nothing of them survived."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from srt_services.testing.jobs import Jobs, free_port


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    j = Jobs(tmp_path)
    yield j
    problems = j.finish()
    assert not problems, "\n".join(problems)
