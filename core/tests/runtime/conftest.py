"""Fixtures for runtime tests: run real jobs, then prove nothing of them survived.

Both are the kit's (``srt_jobs``, ``srt_free_port``) under the short names these tests use.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.testing.jobs import Jobs


@pytest.fixture
def port(srt_free_port: Callable[[], int]) -> int:
    return srt_free_port()


@pytest.fixture
def jobs(srt_jobs: Jobs) -> Jobs:
    return srt_jobs
