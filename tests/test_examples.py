"""Every shipped example is valid with the plugins a user installs next to core.

Core's own tests load the examples with the built-in kinds only (installed plugins never
change a core test). A user who installs the plugins gets more: the implied exporters and
Prometheus, Mooncake, Ray. An implied service's port can then collide with one an example
writes, and the example that passed core's tests fails ``srt validate`` for that user. So
here each example gets ``srt validate``'s verdict with every installed plugin. An example
that needs a plugin this environment lacks is skipped with its name, unless the environment
says it must have it (``SRT_REQUIRE_<PLUGIN>=1``, as the tox environments do).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from srt_services.app import compose, validate
from srt_services.testing import RecipeError

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))
#: How a load error names a plugin that is not installed.
MISSING = re.compile(r"(srt-[a-z0-9-]+)(?:, which)? is not installed")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_is_valid_with_the_installed_plugins(example: Path) -> None:
    try:
        # srt validate's composition: the site config and every installed plugin
        planned = validate.verdict(compose.setup(), validate.ValidateRequest(str(example)))
    except RecipeError as exc:
        missing = {m for p in exc.errors for m in MISSING.findall(p.message)}
        required = {
            m
            for m in missing
            if os.environ.get("SRT_REQUIRE_" + m.removeprefix("srt-").upper()) == "1"
        }
        only_missing = all(MISSING.search(p.message) for p in exc.errors)
        if missing and only_missing and not required:
            pytest.skip(f"needs {', '.join(sorted(missing))}")
        raise AssertionError(f"{example.name} is invalid:\n{exc}") from None
    assert planned.plan.units, f"{example.name} plans nothing"
