"""Property test of the shutdown coordinator: whatever mix of services a job has, teardown
stops tiers in order, escalates exactly the services that ignore SIGTERM, and leaves
nothing behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.jobdir.events import read_events
from srt_services.jobdir.layout import JobDir
from srt_services.testing import kit
from srt_services.testing.survivors import assert_no_survivors

PHASE_TIER = {"after_frontend": 0, "before_workers": 1, "infra": 2}

service = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(sorted(PHASE_TIER)),
        "obeys": st.booleans(),
        "daemon": st.booleans(),
    }
)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(service, min_size=1, max_size=5))
def test_teardown_properties(services: list[dict[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = root / "term.log"
        entries = []
        for i, s in enumerate(services):
            tier = PHASE_TIER[str(s["phase"])]
            exit_part = "exit 0" if s["obeys"] else ":"
            daemon = "setsid sleep 1000 & " if s["daemon"] else ""
            script = (
                f"{daemon}trap 'echo {tier} s{i} >> {log}; {exit_part}' TERM; echo up;"
                " while true; do sleep 0.02; done"
            )
            entries.append(
                f'  - name: s{i}\n    start: {s["phase"]}\n    command: [bash, -c, "{script}"]\n'
                "    readiness: {log: {pattern: up}}\n    stop_grace_seconds: 0.3\n"
            )
        entries.append("  - {name: end, terminal: true, command: [bash, -c, 'sleep 0.2']}\n")
        recipe = root / "r.yaml"
        recipe.write_text(
            "schema: 2\nname: prop\nobservability:\n  metrics: false\nservices:\n"
            + "".join(entries)
        )
        plugins = kit.isolated_plugins()
        job = JobDir(str(root / "job"))
        plan = kit.plan(plugins, recipe, job_dir=job.path, runs_here=True)
        code = kit.supervise(plugins, plan, job.path).code
        assert code == 0
        assert_no_survivors(job.path)
        order = (
            [int(line.split()[0]) for line in log.read_text().splitlines()] if log.exists() else []
        )
        assert order == sorted(order), f"tiers stopped out of order: {order}"
        events = read_events(job.events_file)
        escalated = {e["step"] for e in events if e["event"] == "escalated" and "step" in e}
        expected = {f"service_s{i}" for i, s in enumerate(services) if not s["obeys"]}
        assert escalated == expected
