"""The recipe the plan tests give a benchmark block to: a frontend and one role on
loopback, the model known (so the runner's model name and tokenizer are resolved at plan
time)."""

from __future__ import annotations

from typing import Any

from srt_services.extend import Plan

JOB = """\
schema: 2
name: b
engine: {model: /models/tiny, served_model_name: tiny}
frontend: {type: vllm, command: [front], port: 8123}
roles:
  agg: {command: [worker]}
"""


def client(plan: Plan) -> Any:
    """The benchmark's one client instance."""
    (inst,) = plan.unit("benchmark").instances
    return inst
