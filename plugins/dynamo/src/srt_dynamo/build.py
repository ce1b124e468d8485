"""What every backend's worker builder reads about one worker process, computed once.

The backend modules only say what differs between engines (module, flags, a few variables);
the model argument, the served name, the interpreter, the mode and the slots are the same
facts for all of them, so they live here and cannot drift per backend.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from srt_services.extend import Recipe, WorkerProcess, config_value

from srt_dynamo.environment import SHORT, interpreter
from srt_dynamo.options import MODE_OF_ROLE, DynamoOptions
from srt_dynamo.slots import Slots

#: Roles whose config may name the served model, in srtctl's order.
SERVED_NAME_ROLES = ("prefill", "agg", "decode")


def model_arg(recipe: Recipe) -> str:
    """What workers are given as the model (checked present by the engine's validate)."""
    return recipe.engine.model or ""


def served_model_name(recipe: Recipe) -> str:
    """``engine.served_model_name``; else (sglang, vllm) the first ``served-model-name`` in
    the prefill, agg, decode configs, as srtctl reads it; else the model's last part."""
    if recipe.engine.served_model_name:
        return recipe.engine.served_model_name
    if recipe.engine.type in ("sglang", "vllm"):
        for role in SERVED_NAME_ROLES:
            spec = recipe.roles.get(role)  # type: ignore[call-overload]
            name = config_value(spec.config if spec is not None else None, "served-model-name")
            if name:
                return str(name)
    model = model_arg(recipe).rstrip("/")
    return posixpath.basename(model) or model


def container_of(recipe: Recipe, role: str | None) -> str | None:
    """The container the process runs in: its own, else the job's."""
    if role is None:
        spec_container = recipe.frontend.container if recipe.frontend else None
    else:
        spec = recipe.roles.get(role)  # type: ignore[call-overload]
        spec_container = spec.container if spec is not None else None
    return spec_container or recipe.container


@dataclass(slots=True)
class WorkerBuild:
    recipe: Recipe
    options: DynamoOptions
    proc: WorkerProcess
    slots: Slots
    table: Sequence[Slots]
    processes: Sequence[WorkerProcess]
    #: files the process needs written (``{log_dir}/<name>``)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def role(self) -> str:
        return self.proc.worker.role

    @property
    def mode(self) -> str:
        return MODE_OF_ROLE[self.role]

    @property
    def short(self) -> str:
        return SHORT[self.mode]

    @property
    def config(self) -> dict[str, Any]:
        spec = self.recipe.roles.get(self.role)  # type: ignore[call-overload]
        return dict(spec.config) if spec is not None else {}

    @property
    def python(self) -> str:
        return interpreter(self.options, container_of(self.recipe, self.role))

    @property
    def model(self) -> str:
        return model_arg(self.recipe)

    @property
    def served(self) -> str:
        return served_model_name(self.recipe)

    @property
    def name(self) -> str:
        """srtctl's name for the process (``<node>_<mode>_w<index>``), in file names."""
        return f"{{node}}_{self.short}_w{self.proc.worker.index}"

    @property
    def leader_ip(self) -> str:
        return self.proc.worker.nodes[0].ip

    @property
    def nnodes(self) -> int:
        return len(self.proc.worker.nodes)

    @property
    def gpus(self) -> str:
        return ",".join(str(g) for g in self.proc.worker.gpus)

    def disaggregation(self) -> list[str]:
        return [] if self.role == "agg" else ["--disaggregation-mode", self.role]

    def dump_config(self) -> list[str]:
        if not self.options.dump_config:
            return []
        return ["--dump-config-to", f"{{log_dir}}/{self.name}_config.json"]

    def request_plane(self) -> list[str]:
        if not self.options.request_plane_flag:
            return []
        return ["--request-plane", self.recipe.dynamo.request_plane]

    def kv_events_setting(self) -> bool | dict[str, Any]:
        setting = self.options.kv_events
        if isinstance(setting, dict):
            return setting.get(self.mode, False)  # type: ignore[call-overload, no-any-return]
        return setting
