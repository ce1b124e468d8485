"""Fixtures for the srt-oarbank tests.

The package and this directory go on ``sys.path`` so the tests run with or without an
editable install (the root config uses ``--import-mode=importlib``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).resolve().parent
for _path in (_TESTS.parent / "src", _TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from oarbank_testkit import FakeBundle, ProcessTracker, make_bundle  # noqa: E402


@pytest.fixture
def procs() -> Iterator[ProcessTracker]:
    """No-survivors oracle: at teardown every process our fakes recorded must be gone."""
    tracker = ProcessTracker()
    yield tracker
    tracker.assert_none_survive()


@pytest.fixture
def bundle_factory(tmp_path: Path, procs: ProcessTracker) -> Callable[..., FakeBundle]:
    counter = [0]

    def factory(**kwargs: Any) -> FakeBundle:
        counter[0] += 1
        base = tmp_path / f"b{counter[0]}"
        fake = make_bundle(base, **kwargs)
        procs.watch(fake.data_dir)
        return fake

    return factory
