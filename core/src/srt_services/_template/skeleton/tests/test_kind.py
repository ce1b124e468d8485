"""Tests of the ``{{kind}}`` kind: the shared contract suite plus what is specific to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from srt_services.testing.contracts import KindCase, ServiceKindContract

import {{package}}.plugin
from {{package}}.kind import {{Class}}


class Test{{Class}}Contract(ServiceKindContract):
    """Options validation, defaults, dry-run rendering, env layering, ports, placements."""

    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            {{Class}},
            entries=[
                {},
                {"options": {"port": 28181, "message": "hi"}, "placement": {"node": "all"}},
            ],
            plugin={{package}}.plugin,
        )


def test_command_binds_the_node_address(srt_plan: Callable[..., Any]) -> None:
    plan = srt_plan({"services": [{"name": "demo", "type": "{{kind}}"}]}, nodes=1)
    instance = plan.unit("demo").instances[0]
    assert instance.argv[-4:] == ["--host", "<node0-ip>", "--port", "28080"]
    assert instance.env["{{ENV}}_MESSAGE"] == "hello"
    assert instance.readiness is not None
    assert instance.readiness.probe == "http"


def test_recipe_env_overrides_the_message(srt_plan: Callable[..., Any]) -> None:
    recipe = {"services": [{"name": "d", "type": "{{kind}}", "env": {"{{ENV}}_MESSAGE": "bye"}}]}
    assert srt_plan(recipe).unit("d").instances[0].env["{{ENV}}_MESSAGE"] == "bye"
