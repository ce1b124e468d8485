"""``metrics/targets.json`` under a running job: a milestone is announced only once the file
lists every instance it counts.

The file's writes are coalesced (one write per turn of the event loop), and a phase whose
services need no readiness is ready in the same turn that launched them. A reader that
waits for ``phase_ready`` or ``serving`` and then reads the file must find those services:
the event hook below runs inside the announcement itself, before any later turn could
write the file, so it fails whenever the write still waits for its turn.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srt_services.testing import PluginSet, kit
from srt_services.testing.survivors import assert_no_survivors

RECIPE = """
schema: 2
name: sdrun
frontend: {{type: none}}
services:
  - {{name: a, command: [sleep, "30"], metrics: {{port: {a}}}}}
  - {{name: b, command: [sleep, "30"], metrics: {{port: {b}}}}}
benchmark:
  type: command
  command: [{python}, -c, "import time; time.sleep(0.3)"]
"""


def test_milestones_are_announced_after_the_targets_file_lists_their_instances(
    tmp_path: Path, srt_free_port: Callable[[], int], srt_plugins: PluginSet
) -> None:
    recipe = tmp_path / "r.yaml"
    python = json.dumps(sys.executable)
    recipe.write_text(RECIPE.format(a=srt_free_port(), b=srt_free_port(), python=python))
    job_dir = str(tmp_path / "job")
    plan = kit.plan(srt_plugins, recipe, job_dir=job_dir, runs_here=True)
    targets = Path(job_dir, "metrics", "targets.json")
    seen: dict[str, list[str]] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "phase_ready" and event.get("phase") == "after_frontend":
            listed = json.loads(targets.read_text())
            seen["after_frontend"] = sorted(g["labels"]["step"] for g in listed)

    code = kit.supervise(srt_plugins, plan, job_dir, on_event=on_event).code
    assert code == 0
    assert seen == {"after_frontend": ["service_a", "service_b"]}
    assert json.loads(targets.read_text()) == [], "nothing runs after the job: nothing listed"
    assert_no_survivors(job_dir)
