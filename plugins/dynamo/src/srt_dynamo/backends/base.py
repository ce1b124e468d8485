"""What a backend module provides to the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from srt_dynamo.build import WorkerBuild


def _nothing(build: WorkerBuild) -> dict[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class Backend:
    #: the worker's command, recipe config flags included
    argv: Callable[[WorkerBuild], list[str]]
    #: config keys the engine sets itself: the recipe's copy is dropped (with a warning)
    owned: frozenset[str]
    #: variables over the recipe's env (ports the engine computed)
    forced_env: Callable[[WorkerBuild], dict[str, str]] = _nothing
    #: srt sets CUDA_VISIBLE_DEVICES for a worker on part of a node (vLLM: --device-ids)
    visible_devices: Callable[[WorkerBuild], bool] = lambda build: True
    #: config keys with a meaning of their own here (not turned into flags)
    special: frozenset[str] = field(default_factory=frozenset)


def dropped(owned: frozenset[str], out: list[str], conditional: frozenset[str]) -> frozenset[str]:
    """The recipe's config keys the worker leaves out: those srt owns, except the
    ``conditional`` ones this worker's argv does not set (srtctl sets
    ``--disaggregation-bootstrap-port`` for prefill only, ``--kv-transfer-config`` only with a
    connector), so the recipe's own value reaches the worker as with srtctl."""
    return owned - {name for name in conditional if f"--{name}" not in out}
