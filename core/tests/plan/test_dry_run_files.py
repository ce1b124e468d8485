"""Dry-run shows each file a kind writes at the path the launch writes it to: a name
relative to the work directory under it, a ``{log_dir}/...`` name in the log directory
(process-exporter's groups file was shown at ``<work_dir>/<log_dir>/...``)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from srt_services.extend import InstanceContext, ServiceKind, ServiceSpec
from srt_services.plan.text import render_plan
from srt_services.plugins.manager import PluginSet
from srt_services.supervise.launching import write_files
from srt_services.testing import kit
from srt_services.testing.kit import ClassesPlugin


class Writer(ServiceKind):
    name: ClassVar[str] = "x-writer"
    summary: ClassVar[str] = "writes a file beside the logs and one of its own"
    requires_command: ClassVar[bool] = True

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return {"{log_dir}/groups.yml": "a: 1\n", "own.conf": "b\n"}


RECIPE = (
    "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"
    "  - {name: w, type: x-writer, command: [w]}\n"
)


def test_dry_run_shows_where_launch_writes(srt_plugins: PluginSet, tmp_path: Any) -> None:
    srt_plugins.register(ClassesPlugin([Writer]), "writer")
    job = str(tmp_path / "job")
    plan = kit.plan(srt_plugins, RECIPE, job_dir=job)
    (inst,) = next(u for u in plan.units if u.name == "w").instances
    text = render_plan(plan)
    shown = sorted(
        line.split("file ", 1)[1].rsplit(" (", 1)[0]
        for line in text.splitlines()
        if line.strip().startswith("file ")
    )
    log_dir = f"{job}/logs"
    os.makedirs(log_dir, exist_ok=True)
    write_files(inst, log_dir)
    assert shown == [f"{log_dir}/groups.yml", f"{inst.work_dir}/own.conf"]
    for path in shown:
        assert os.path.isfile(path), path
