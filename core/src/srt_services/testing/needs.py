"""Tests that need a real component (a server binary, an optional wheel).

Such a test skips where the component is not installed, so a developer without it can still
run the suite; an environment that installs it (a tox env, CI) sets a ``SRT_REQUIRE_*``
variable and the same test fails instead, so a broken install cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import NoReturn

import pytest


def missing(reason: str, required_by: str) -> NoReturn:
    """Skip for ``reason``; fail instead when the variable ``required_by`` is ``1``."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{reason} ({required_by}=1)", pytrace=False)
    pytest.skip(reason)


def venv_script(name: str) -> str | None:
    """A console script where srt looks for a server: PATH, then the ``bin`` directory of the
    Python running the tests (a ``pip install 'srt-x[server]'`` in a never-activated venv)."""
    found = shutil.which(name)
    if found is not None:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else None


def version_of(distribution: str, install: str, required_by: str) -> str:
    """The installed version of ``distribution``; skips (or fails, see :func:`missing`) when it
    is not installed, naming ``install``, the command that installs it."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        missing(f"needs {distribution}: {install}", required_by)
