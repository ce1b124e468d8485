"""The plugin API: everything an ``srt-<kind>`` plugin needs, importable from here.

A plugin imports from ``srt_services.extend`` and nothing else of srt (its tests may also
use ``srt_services.testing``); a test in core walks ``plugins/*/src`` and fails on any other
``srt_services`` import. Core may move its internals freely; what is named here is the
contract, changed only additively within a major version.

The names are resolved on first use (PEP 562): a plugin's entry module imports
:data:`hookimpl` from here, and that must not pay for pydantic or the recipe models, since
``srt`` imports a plugin only when a recipe needs it and keeps ``--help`` free of both.

What lives where:

* registration interfaces: :class:`ServiceKind` (and :class:`ServerKind` for a server
  binary that owns its ports, :class:`DiscoveryServerKind` for a discovery plane's),
  :class:`Engine` (a serving stack building the workers and the frontend:
  :class:`EngineProcess`, :class:`WorkerProcess`, :func:`worker_processes`),
  :class:`BenchmarkKind` (:data:`RESULT_VAR`), :class:`RecipeFormat` (another tool's
  recipes: :class:`Variant`, :class:`Translated`, :class:`FormatProblems`),
  :class:`Probe`, :class:`Placement`, :class:`Expansion`, :class:`Launcher`, and
  :class:`ImpliedService` for ``srt_implied_services``, :class:`ReportSection` for
  ``srt_report_sections`` and :class:`StatusSection` for ``srt_status_sections``;
* what those see while a plan is built: :class:`InstanceContext`, :class:`Node`,
  :class:`Layout`, :class:`Worker`, :class:`JobPaths` (and :class:`PathOutsideJob`, what
  :meth:`InstanceContext.job_path` raises for a relative path leaving the job directory);
* the plan they end up in: :class:`Plan`, :class:`PlannedUnit`, :class:`PlannedInstance`,
  :class:`PlannedProbe`, :class:`ScrapeTarget`, and the shutdown tiers
  (:data:`TIER_OF_PHASE`; :data:`LAST_TIER` for a kind that ``stops_last``);
* recipe types they receive or build on: :class:`Recipe`, :class:`ServiceSpec`,
  :class:`MetricsSpec`, :class:`UseSpec` (a unit's ``uses`` entry, for a kind that
  :attr:`~ServiceKind.accepts_uses`; :data:`EXIT_REASON_FILE` is where its wrapper says why
  it refused), :class:`StrictModel`, :class:`KindOptions`, :data:`Port`, and
  :class:`Problem` to report what is wrong with them;
* helpers: the server kinds' helpers (:func:`server_binary`, :func:`url_host`,
  :func:`switched_off_problems`...),
  :func:`render`
  (placeholders), :mod:`~srt_services.extend.processes` (process groups, start times, the
  PID-reuse guard), :mod:`~srt_services.extend.backoff` (the restart backoff srt's
  supervisor uses, for plugins that restart things themselves), :func:`unknown_placeholders`
  (refuse a typo in a path or template an option takes, as srt does in the recipe),
  :mod:`~srt_services.extend.app` (load and plan a recipe the way ``srt`` does),
  :mod:`~srt_services.extend.jobs` (read a job directory: :func:`read_job`, for plugin
  commands such as ``srt metrics``);
* srtctl's worker rules, for the engines that build workers as srtctl does (srt-dynamo,
  srt-direct: plugins never import each other, and one copy cannot drift):
  :func:`worker_slots` (:class:`WorkerSlots` over :class:`SlotBases`, srtctl's port
  formulas), :func:`config_value` (a config key under either spelling), and sglang's
  server flags (:func:`sglang_server_flags`, :data:`SGLANG_SERVER_FLAGS`,
  :func:`sglang_kv_events_config`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srt_services.app.job_record import JobDirError, JobRecord, read_job
    from srt_services.contracts.benchmark import RESULT_VAR, BenchmarkKind
    from srt_services.contracts.context import (
        InstanceContext,
        JobPaths,
        Layout,
        Node,
        PathOutsideJob,
        Worker,
    )
    from srt_services.contracts.engine import (
        Engine,
        EngineProcess,
        WorkerProcess,
        backend_flags,
        worker_processes,
    )
    from srt_services.contracts.expansion import Expansion, InstanceSeed
    from srt_services.contracts.formats import FormatProblems, RecipeFormat, Translated, Variant
    from srt_services.contracts.implied import ImpliedService
    from srt_services.contracts.kind import DefaultProbe, KindOptions, NoOptions, ServiceKind
    from srt_services.contracts.launcher import LAUNCH_SETTINGS, Launcher, Preflight
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.plan import (
        LAST_TIER,
        TIER_OF_PHASE,
        Plan,
        PlannedInstance,
        PlannedProbe,
        PlannedUnit,
        ScrapeTarget,
    )
    from srt_services.contracts.probe import Probe, ProbeResult, ProbeTarget
    from srt_services.contracts.report import ReportSection
    from srt_services.contracts.servers import (
        EXIT_REASON_FILE,
        DiscoveryServerKind,
        ServerKind,
        ServerOptions,
        binary_option_problems,
        dir_option_problems,
        missing_binary_check,
        one_per_job_problems,
        server_binary,
        switched_off_problems,
        url_host,
        venv_bin,
    )
    from srt_services.contracts.srtctl_workers import (
        SGLANG_SERVER_FLAGS,
        SlotBases,
        WorkerSlots,
        config_value,
        sglang_kv_events_config,
        sglang_server_flags,
        worker_slots,
    )
    from srt_services.contracts.status import StatusSection
    from srt_services.hookspecs import hookimpl
    from srt_services.recipe.models import (
        MetricsSpec,
        Port,
        Recipe,
        ServiceSpec,
        StrictModel,
        UseSpec,
    )
    from srt_services.recipe.placeholders import render, unknown_placeholders
    from srt_services.recipe.problems import Problem

#: public name -> module that defines it
_WHERE: dict[str, str] = {
    "Engine": "srt_services.contracts.engine",
    "EngineProcess": "srt_services.contracts.engine",
    "WorkerProcess": "srt_services.contracts.engine",
    "worker_processes": "srt_services.contracts.engine",
    "backend_flags": "srt_services.contracts.engine",
    "BenchmarkKind": "srt_services.contracts.benchmark",
    "RESULT_VAR": "srt_services.contracts.benchmark",
    "RecipeFormat": "srt_services.contracts.formats",
    "Variant": "srt_services.contracts.formats",
    "Translated": "srt_services.contracts.formats",
    "FormatProblems": "srt_services.contracts.formats",
    "hookimpl": "srt_services.hookspecs",
    "InstanceContext": "srt_services.contracts.context",
    "JobPaths": "srt_services.contracts.context",
    "Layout": "srt_services.contracts.context",
    "Node": "srt_services.contracts.context",
    "PathOutsideJob": "srt_services.contracts.context",
    "Worker": "srt_services.contracts.context",
    "Expansion": "srt_services.contracts.expansion",
    "InstanceSeed": "srt_services.contracts.expansion",
    "ImpliedService": "srt_services.contracts.implied",
    "JobDirError": "srt_services.app.job_record",
    "JobRecord": "srt_services.app.job_record",
    "read_job": "srt_services.app.job_record",
    "DefaultProbe": "srt_services.contracts.kind",
    "KindOptions": "srt_services.contracts.kind",
    "NoOptions": "srt_services.contracts.kind",
    "ServiceKind": "srt_services.contracts.kind",
    "LAUNCH_SETTINGS": "srt_services.contracts.launcher",
    "Launcher": "srt_services.contracts.launcher",
    "Preflight": "srt_services.contracts.launcher",
    "Placement": "srt_services.contracts.placement",
    "LAST_TIER": "srt_services.contracts.plan",
    "TIER_OF_PHASE": "srt_services.contracts.plan",
    "Plan": "srt_services.contracts.plan",
    "PlannedInstance": "srt_services.contracts.plan",
    "PlannedProbe": "srt_services.contracts.plan",
    "PlannedUnit": "srt_services.contracts.plan",
    "ScrapeTarget": "srt_services.contracts.plan",
    "Probe": "srt_services.contracts.probe",
    "ProbeResult": "srt_services.contracts.probe",
    "ProbeTarget": "srt_services.contracts.probe",
    "ReportSection": "srt_services.contracts.report",
    "EXIT_REASON_FILE": "srt_services.contracts.servers",
    "StatusSection": "srt_services.contracts.status",
    "SGLANG_SERVER_FLAGS": "srt_services.contracts.srtctl_workers",
    "SlotBases": "srt_services.contracts.srtctl_workers",
    "WorkerSlots": "srt_services.contracts.srtctl_workers",
    "config_value": "srt_services.contracts.srtctl_workers",
    "sglang_kv_events_config": "srt_services.contracts.srtctl_workers",
    "sglang_server_flags": "srt_services.contracts.srtctl_workers",
    "worker_slots": "srt_services.contracts.srtctl_workers",
    "UseSpec": "srt_services.recipe.models",
    "ServerKind": "srt_services.contracts.servers",
    "DiscoveryServerKind": "srt_services.contracts.servers",
    "switched_off_problems": "srt_services.contracts.servers",
    "ServerOptions": "srt_services.contracts.servers",
    "binary_option_problems": "srt_services.contracts.servers",
    "dir_option_problems": "srt_services.contracts.servers",
    "missing_binary_check": "srt_services.contracts.servers",
    "one_per_job_problems": "srt_services.contracts.servers",
    "server_binary": "srt_services.contracts.servers",
    "url_host": "srt_services.contracts.servers",
    "venv_bin": "srt_services.contracts.servers",
    "MetricsSpec": "srt_services.recipe.models",
    "Port": "srt_services.recipe.models",
    "Recipe": "srt_services.recipe.models",
    "ServiceSpec": "srt_services.recipe.models",
    "StrictModel": "srt_services.recipe.models",
    "render": "srt_services.recipe.placeholders",
    "unknown_placeholders": "srt_services.recipe.placeholders",
    "Problem": "srt_services.recipe.problems",
}

__all__ = [
    "EXIT_REASON_FILE",
    "LAST_TIER",
    "LAUNCH_SETTINGS",
    "RESULT_VAR",
    "SGLANG_SERVER_FLAGS",
    "TIER_OF_PHASE",
    "BenchmarkKind",
    "DefaultProbe",
    "DiscoveryServerKind",
    "Engine",
    "EngineProcess",
    "Expansion",
    "FormatProblems",
    "ImpliedService",
    "InstanceContext",
    "InstanceSeed",
    "JobDirError",
    "JobPaths",
    "JobRecord",
    "KindOptions",
    "Launcher",
    "Layout",
    "MetricsSpec",
    "NoOptions",
    "Node",
    "PathOutsideJob",
    "Placement",
    "Plan",
    "PlannedInstance",
    "PlannedProbe",
    "PlannedUnit",
    "Port",
    "Preflight",
    "Probe",
    "ProbeResult",
    "ProbeTarget",
    "Problem",
    "Recipe",
    "RecipeFormat",
    "ReportSection",
    "ScrapeTarget",
    "ServerKind",
    "ServerOptions",
    "ServiceKind",
    "ServiceSpec",
    "SlotBases",
    "StatusSection",
    "StrictModel",
    "Translated",
    "UseSpec",
    "Variant",
    "Worker",
    "WorkerProcess",
    "WorkerSlots",
    "backend_flags",
    "binary_option_problems",
    "config_value",
    "dir_option_problems",
    "hookimpl",
    "missing_binary_check",
    "one_per_job_problems",
    "read_job",
    "render",
    "server_binary",
    "sglang_kv_events_config",
    "sglang_server_flags",
    "switched_off_problems",
    "unknown_placeholders",
    "url_host",
    "venv_bin",
    "worker_processes",
    "worker_slots",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'srt_services.extend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
