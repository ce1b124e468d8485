"""The fixtures every oarbank test directory uses: the no-survivors oracle, fake module
bundles, and a short directory for Unix sockets.

A module of its own, not a conftest, because two test directories need them (the library's
and the srt adapter's, which drives the same fake modules); each conftest imports them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from oarbank_testkit import FakeBundle, ProcessTracker, make_bundle


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


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths are limited to 107 bytes; a test must not depend on tmp_path's."""
    path = Path(tempfile.mkdtemp(prefix="oba", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
