"""Fixtures for the oarbank-protocol tests.

The package and this directory go on ``sys.path`` so the tests run with or without an
editable install (the root config uses ``--import-mode=importlib``). Nothing here, and no
test of this directory, imports srt: the library's tests run where srt is not installed
(tox env ``oarbank-protocol``).
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
for _path in (_TESTS.parent / "src", _TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# Imported by name so pytest registers them for this directory.
from oarbank_fixtures import bundle_factory, procs, short_dir  # noqa: E402

__all__ = ["bundle_factory", "procs", "short_dir"]
