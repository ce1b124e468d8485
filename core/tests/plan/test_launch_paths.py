"""How a Slurm job starts each instance is settled in the plan (``slurm.launcher``).

The recipe's word wins, then the site's, then the node count against the site's
``agents_above_nodes``; an instance that needs what only srun applies keeps a step of its
own; a plan that runs on this machine records no choice; ``srt dry-run`` says it all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from srt_services.plan.launch_paths import choose
from srt_services.site_config import SiteConfig, SiteConfigError, SlurmDefaults, parse
from srt_services.testing import kit


def _recipe(launcher: str | None = None, pool: int = 3) -> dict[str, Any]:
    slurm: dict[str, Any] = {} if launcher is None else {"launcher": launcher}
    return {
        "schema": 2,
        "name": "paths",
        "observability": {"metrics": False},
        "slurm": slurm,
        "services": [
            {"name": "web", "nodes": pool, "command": ["sleep", "1"]},
            {"name": "boxed", "container": "img", "command": ["sleep", "1"]},
            {"name": "pinned", "cpus_per_task": 4, "command": ["sleep", "1"]},
            {"name": "raw", "srun_options": {"exclusive": ""}, "command": ["sleep", "1"]},
        ],
    }


def _vias(plan: Any) -> dict[str, str | None]:
    return {i.step: i.via for i in plan.instances()}


def test_the_choice_recipe_then_site_then_size() -> None:
    assert choose("steps", "agents", 0, 100) == "steps"
    assert choose(None, "steps", 0, 100) == "steps"
    assert choose(None, None, 8, 8) == "steps"
    assert choose(None, None, 8, 9) == "agents"
    assert choose("agents", None, 8, 1) == "agents"


def test_agents_run_every_instance_but_those_only_srun_can_start() -> None:
    plan = kit.plan(kit.isolated_plugins(), _recipe("agents"))
    assert plan.slurm_launcher == "agents"
    vias = _vias(plan)
    assert {s: v for s, v in vias.items() if s.startswith("service_web")} == {
        "service_web_node0": "agent",
        "service_web_node1": "agent",
        "service_web_node2": "agent",
    }
    assert (vias["service_boxed"], vias["service_pinned"], vias["service_raw"]) == (
        "step",
        "step",
        "step",
    )


def test_the_site_and_the_node_count_decide_when_the_recipe_does_not() -> None:
    small = kit.plan(kit.isolated_plugins(), _recipe(None, pool=3))
    assert small.slurm_launcher == "steps" and set(_vias(small).values()) == {"step"}
    big = kit.plan(kit.isolated_plugins(), _recipe(None, pool=9))
    assert big.slurm_launcher == "agents", "more than 8 nodes: one agent per node"
    site = SiteConfig(slurm=SlurmDefaults(agents_above_nodes=20))
    assert kit.plan(kit.isolated_plugins(), _recipe(None, pool=9), site=site).slurm_launcher == (
        "steps"
    )
    site = SiteConfig(slurm=SlurmDefaults(launcher="agents"))
    assert kit.plan(kit.isolated_plugins(), _recipe(None), site=site).slurm_launcher == "agents"
    assert kit.plan(kit.isolated_plugins(), _recipe("steps"), site=site).slurm_launcher == "steps"


def test_a_plan_that_runs_here_records_no_slurm_choice() -> None:
    plan = kit.plan(kit.isolated_plugins(), _recipe("agents"), local=True)
    assert plan.slurm_launcher is None and set(_vias(plan).values()) == {None}


def test_dry_run_says_which_way_each_instance_starts(tmp_path: Path) -> None:
    import json

    import yaml

    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(_recipe("agents")))
    out = kit.run_cli(["dry-run", str(recipe)])
    assert out.code == 0, out.stderr
    assert (
        "Launcher (Slurm): agents - one srt agent per node starts 3 instance(s);"
        " 3 need an srun step of their own (marked below)"
    ) in out.stdout
    assert "service_boxed on node0 (<node0-ip>) [own srun step: container]" in out.stdout
    assert "service_pinned on node0 (<node0-ip>) [own srun step: cpus_per_task]" in out.stdout
    assert "service_web_node1 on node1 (<node1-ip>)\n" in out.stdout
    srun = kit.run_cli(["dry-run", str(recipe), "--srun"]).stdout
    lines = srun.split("srun lines (job <job_id>):\n")[1].splitlines()
    assert lines[0].startswith("  srt-agents: srun '--jobid=<job_id>' --overlap --whole --no-kill")
    assert "--nodelist=node0,node1,node2" in lines[0]
    assert "--report-address" in lines[0], "started with the allocation: it says its address"
    assert "  service_web_node2: (via the srt agent on node2)" in lines
    assert any(line.startswith("  service_boxed: srun ") for line in lines)
    doc = json.loads(kit.plan(kit.isolated_plugins(), recipe).to_json())
    assert doc["slurm_launcher"] == "agents"
    assert {i["step"]: i["via"] for u in doc["units"] for i in u["instances"]}["service_raw"] == (
        "step"
    )
    recipe.write_text(yaml.safe_dump(_recipe("steps")))
    steps = kit.run_cli(["dry-run", str(recipe)]).stdout
    assert "Launcher (Slurm): steps - every instance is an srun step of its own" in steps
    assert "[own srun step" not in steps


def test_a_launcher_that_does_not_exist_is_refused_with_its_place() -> None:
    text = "schema: 2\nname: x\nslurm:\n  launcher: pods\nservices:\n  - {name: a, command: [x]}\n"
    errors = kit.recipe_errors(kit.isolated_plugins(), text)
    assert errors == ["kit.yaml:4:3: slurm.launcher: must be one of steps, agents; got 'pods'"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"launcher": "pods"}, r"slurm\.launcher must be one of steps, agents"),
        ({"agents_above_nodes": -1}, r"slurm\.agents_above_nodes must be a whole number"),
        ({"agents_above_nodes": True}, r"slurm\.agents_above_nodes must be a whole number"),
        ({"agent_start_timeout_seconds": 0}, r"slurm\.agent_start_timeout_seconds must be"),
        ({"agent_lost_after_seconds": "10"}, r"slurm\.agent_lost_after_seconds must be"),
    ],
)
def test_the_sites_agent_settings_are_checked(table: dict[str, Any], message: str) -> None:
    with pytest.raises(SiteConfigError, match=message):
        parse({"slurm": table}, "site.toml")


def test_the_sites_agent_settings_reach_the_launcher() -> None:
    from srt_services.app import compose

    site = parse(
        {"slurm": {"agent_start_timeout_seconds": 5, "agent_lost_after_seconds": 2.5}}, "s"
    )
    settings = compose.launch_settings(kit.setup(site=site), "c")
    assert (settings.agent_start_timeout, settings.agent_lost_after) == (5.0, 2.5)
