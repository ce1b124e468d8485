"""Session-wide safety net for every test package: no ``srt run`` outlives its test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# The plugin author kit's fixtures (srt_plugins, srt_register, srt_plan, ...) for every test
# of the repository: the project's own tests use the kit it ships.
pytest_plugins = ["srt_services.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _stop_leftover_srt_runs() -> Iterator[None]:
    yield
    from srt_services.testing.jobs import stop_leftover_runs

    left = stop_leftover_runs()
    assert not left, f"{left} srt run process(es) were still running at the end of the test"
