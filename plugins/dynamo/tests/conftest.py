"""The kit's fixtures set to srt-dynamo's tests: only core and this plugin are registered
(plans hold no etcd: srt-etcd, which implies it, is not part of these plugin sets)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import srt_dynamo.plugin
from srt_services.testing.kit import KitSettings

# the helper module beside the tests (dynamo_stack), importable under
# pytest's importlib mode
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    return KitSettings(
        srt_dynamo.plugin,
        "srt-dynamo",
        "recipe.yaml",
        local=True,
        job_dir="/jobs/j",
        fill={"observability": {"metrics": False}},
    )


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory for the mocker and the frontend, built here (nothing downloaded)."""
    from srt_dynamo.tiny_model import build

    path = tmp_path_factory.mktemp("models") / "tiny"
    build(str(path), "tiny")
    return path
