"""The kit's fixtures set to srt-benchmarks' tests: only core and this plugin are
registered, jobs planned on loopback nodes with ``{job_dir}`` = ``/jobs/j``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import srt_benchmarks.plugin
from srt_services.testing.kit import KitSettings

# the tests' shared recipe text (jobtext.py) is imported by name (--import-mode=importlib)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    return KitSettings(
        srt_benchmarks.plugin,
        "srt-benchmarks",
        "recipe.yaml",
        local=True,
        job_dir="/jobs/j",
        fill={"observability": {"metrics": False}},
    )
