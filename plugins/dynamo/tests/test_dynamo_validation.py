"""What the dynamo engine refuses, each at its YAML line: a setting never silently ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from srt_dynamo.validate import flag_values
from srt_services.extend import Plan

HEAD = """\
schema: 2
name: t
services: [{name: etcd, enabled: false}, {name: nats, enabled: false}]
resources: {gpus_per_node: 4}
"""


def test_a_request_plane_flag_against_the_setting_is_refused_at_its_word(
    srt_problem: Callable[..., Any],
) -> None:
    p = srt_problem(
        HEAD
        + """\
dynamo: {request_plane: tcp}
frontend: {type: dynamo, command: ["{python}", -m, dynamo.frontend]}
engine: {type: mocker, model: /m/tiny}
roles:
  agg:
    args: [--request-plane, nats]
"""
    )
    assert p.label == "roles.agg.args[1]"
    assert (p.line, p.column) == (10, 29)
    assert p.message.startswith("--request-plane nats contradicts dynamo.request_plane: tcp")


def test_an_http_port_against_frontend_port_is_refused(srt_problem: Callable[..., Any]) -> None:
    p = srt_problem(
        HEAD
        + """\
frontend: {type: dynamo, port: 8001, args: [--http-port=9000]}
engine: {type: mocker, model: /m/tiny}
roles: {agg: {}}
"""
    )
    assert p.label == "frontend.args[0]"
    assert p.line == 5
    assert "--http-port 9000 contradicts frontend.port: 8001" in p.message


def test_a_plane_variable_against_the_setting_is_refused(srt_problem: Callable[..., Any]) -> None:
    p = srt_problem(
        HEAD
        + """\
dynamo: {event_plane: zmq}
frontend: {type: dynamo, env: {DYN_EVENT_PLANE: nats}}
engine: {type: mocker, model: /m/tiny}
roles: {agg: {}}
"""
    )
    assert p.label == "frontend.env.DYN_EVENT_PLANE"
    assert "contradicts dynamo.event_plane: zmq" in p.message


def test_the_same_flag_as_the_setting_is_fine(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        HEAD
        + """\
dynamo: {request_plane: nats}
frontend: {type: dynamo, port: 9000, args: [--http-port, "9000"]}
engine: {type: mocker, model: /m/tiny}
roles: {agg: {args: [--request-plane=nats]}}
"""
    )
    assert plan.unit("agg").instances[0].argv[-1] == "--request-plane=nats"


def test_built_workers_need_a_model(srt_problem: Callable[..., Any]) -> None:
    p = srt_problem(HEAD + "frontend: {type: dynamo}\nengine: {type: mocker}\nroles: {agg: {}}\n")
    assert p.label == "engine.model"
    assert p.message.startswith("is required: srt-dynamo gives it to the workers")


def test_a_system_port_dynamo_cannot_read_is_refused(srt_problem: Callable[..., Any]) -> None:
    p = srt_problem(
        HEAD
        + """\
frontend: {type: dynamo}
engine: {type: mocker, model: /m/x, options: {ports: {system: 32767}}}
roles: {prefill: {}, decode: {}}
"""
    )
    assert p.label == "engine.options.ports.system"
    assert "would be 32768, above 32767" in p.message


def test_a_trtllm_worker_wider_than_a_node_is_refused_by_the_local_launcher(
    srt_plan: Callable[..., Plan],
) -> None:
    """One MPI launch across nodes cannot run on the local launcher's virtual nodes: `srt
    run` refuses it when the plan is made, at the role's gpus_per_worker, saying why."""
    from srt_services.testing import RecipeError

    text = (
        HEAD
        + "frontend: {type: dynamo}\nengine: {type: trtllm, model: /m/x}\n"
        + "roles: {agg: {gpus_per_worker: 8}}\n"
    )
    with pytest.raises(RecipeError) as caught:
        srt_plan(text, runs_here=True, job_dir="/jobs/j")
    (p,) = caught.value.errors
    assert p.label == "roles.agg.gpus_per_worker"
    assert "each agg worker is one launch across 2 nodes" in p.message
    assert "the local launcher cannot start" in p.message
    # without a launcher (a dry run, or the plan an sbatch script runs), it plans
    plan = srt_plan(text, local=False)
    (worker,) = plan.unit("agg").instances
    assert worker.nodes == ["node0", "node1"]


def test_a_served_name_in_config_against_the_engine_one_is_refused(
    srt_problem: Callable[..., Any],
) -> None:
    p = srt_problem(
        HEAD
        + "frontend: {type: dynamo}\n"
        + "engine: {type: sglang, model: /m/x, served_model_name: a}\n"
        + "roles: {agg: {config: {served-model-name: b}}}\n"
    )
    assert p.label == "roles.agg.config.served-model-name"
    assert p.message.startswith("b contradicts the served model name a")


def test_two_install_sources_are_refused(srt_problems: Callable[..., Any]) -> None:
    found = srt_problems(
        HEAD
        + "frontend: {type: dynamo}\n"
        + "engine: {type: mocker, model: /m/x, options: {install: {version: '1', wheel: '1'}}}\n"
        + "roles: {agg: {}}\n"
    )
    assert any("give one install source, not version and wheel" in p.message for p in found)


def test_job_env_reaches_hand_written_processes(srt_plan: Callable[..., Plan]) -> None:
    """Planes and the frontend port reach processes the recipe wrote itself."""
    plan = srt_plan(
        HEAD
        + """\
dynamo: {request_plane: nats, event_plane: nats}
frontend: {type: dynamo, port: 18000, command: ["{python}", -m, dynamo.frontend]}
roles: {agg: {command: ["{python}", -m, dynamo.mocker]}}
"""
    )
    for unit in ("frontend", "agg"):
        env = plan.unit(unit).instances[0].env
        assert (env["DYN_REQUEST_PLANE"], env["DYN_EVENT_PLANE"]) == ("nats", "nats")
    assert plan.unit("frontend").instances[0].env["DYN_HTTP_PORT"] == "18000"


@pytest.mark.parametrize(
    ("words", "found"),
    [
        (["--x", "--request-plane", "nats"], [(2, "nats")]),
        (["--request-plane=tcp", "--request-plane"], [(0, "tcp")]),
        (["--request-planes", "x"], []),
    ],
)
def test_flag_values(words: list[str], found: list[tuple[int, str]]) -> None:
    assert list(flag_values(words, "--request-plane")) == found


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["--request-plane", "--request-plane=nats", "nats", "tcp", "x"])))
def test_flag_values_fuzz(words: list[str]) -> None:
    """Each value is the word after a bare flag, or what follows ``=``; positions only grow."""
    found = list(flag_values(words, "--request-plane"))
    indexes = [i for i, _ in found]
    assert indexes == sorted(set(indexes))
    for index, value in found:
        word = words[index]
        after_bare = index > 0 and words[index - 1] == "--request-plane" and value == word
        assert after_bare or word == "--request-plane=" + value


def test_a_dropped_copy_is_warned_only_where_it_is_dropped(srt_load: Callable[..., Any]) -> None:
    """The prefill's bootstrap port is srt's (warned); decode's and a mocker knob's copies
    are the ones that run (no warning)."""
    bootstrap = {"disaggregation-bootstrap-port": 30001}
    loaded = srt_load(
        {
            "schema": 2,
            "name": "w",
            "resources": {"gpus_per_node": 4},
            "engine": {"type": "sglang", "model": "/model"},
            "frontend": {"type": "dynamo"},
            "services": [{"name": "etcd", "enabled": False}, {"name": "nats", "enabled": False}],
            "roles": {
                "prefill": {"workers": 1, "config": bootstrap},
                "decode": {"workers": 1, "config": bootstrap},
            },
        }
    )
    dropped = [w for w in loaded.warnings if "this copy is dropped" in w.message]
    assert [w.label for w in dropped] == ["roles.prefill.config.disaggregation-bootstrap-port"]
    mocker = srt_load(
        {
            "schema": 2,
            "name": "m",
            "resources": {"gpus_per_node": 4},
            "engine": {"type": "mocker", "model": "/model"},
            "frontend": {"type": "dynamo"},
            "services": [{"name": "etcd", "enabled": False}, {"name": "nats", "enabled": False}],
            "roles": {"agg": {"workers": 1, "config": {"max-num-seqs": 8}}},
        }
    )
    assert not [w for w in mocker.warnings if "dropped" in w.message], mocker.warnings
