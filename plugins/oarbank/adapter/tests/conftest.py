"""Fixtures for the srt-oarbank (adapter) tests.

Both packages' sources go on ``sys.path``, so the tests run with or without editable
installs, and so does the library's test directory: the adapter's tests drive the same fake
modules through the library's test kit and fixtures.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
_PROTOCOL = _TESTS.parents[1] / "protocol"
for _path in (_TESTS.parent / "src", _PROTOCOL / "src", _PROTOCOL / "tests", _TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# Imported by name so pytest registers them for this directory.
from oarbank_fixtures import bundle_factory, procs, short_dir  # noqa: E402

__all__ = ["bundle_factory", "procs", "short_dir"]
