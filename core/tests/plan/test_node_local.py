"""Where a job's node-local state goes (``{local_dir}``), and which nodes hold some.

The root is the site's ``[storage] node_local`` when set, else the job's ``$SLURM_TMPDIR``,
else ``/tmp``; the plan records it (``Plan.local_dir``) so every launcher removes the same
tree, and :meth:`Plan.local_dir_nodes` names the nodes where there is one to remove.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.contracts.plan import Plan
from srt_services.site_config import SiteConfig, node_local_root, parse


def test_the_site_setting_wins_then_slurm_tmpdir_then_tmp() -> None:
    site = parse({"storage": {"node_local": "/local/ssd/"}}, "site.toml")
    assert node_local_root(site, {"SLURM_TMPDIR": "/scratch/job.7"}) == "/local/ssd"
    assert node_local_root(SiteConfig(), {"SLURM_TMPDIR": "/scratch/job.7/"}) == "/scratch/job.7"
    assert node_local_root(SiteConfig(), {}) == "/tmp"


@pytest.mark.parametrize("value", ["", "relative/dir", "/a\nb"])
def test_an_unusable_slurm_tmpdir_is_ignored(value: str) -> None:
    assert node_local_root(SiteConfig(), {"SLURM_TMPDIR": value}) == "/tmp"


def test_the_plan_records_the_root_the_job_sees(
    srt_plan: Callable[..., Plan], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: t\nservices:\n"
        "  - {name: wal, command: [db, --data, '{local_dir}/data']}\n"
    )
    monkeypatch.setenv("SLURM_TMPDIR", "/scratch/job.7")
    plan = srt_plan(recipe, job_id="7")
    assert plan.local_dir == "/scratch/job.7/srt-7"
    (inst,) = plan.unit("wal").instances
    assert inst.argv == ["db", "--data", "/scratch/job.7/srt-7/service_wal/data"]
    assert inst.preamble == "mkdir -p -- /scratch/job.7/srt-7/service_wal"


def test_local_dir_nodes_are_those_that_keep_something_there(
    srt_plan: Callable[..., Plan],
) -> None:
    p = srt_plan(
        {
            "services": [
                {"name": "plain", "command": ["x"], "placement": {"node": "all"}, "nodes": None},
                {"name": "wal", "command": ["db", "{local_dir}"], "placement": {"pool": "own"}},
                {"name": "own", "command": ["x"], "nodes": 2},
                {
                    "name": "built",
                    "command": ["x"],
                    "placement": {"node": "head"},
                    "source": {"git": "https://example.invalid/r", "rev": "v1"},
                    "build_command": ["make"],
                },
                {
                    "name": "shared-build",
                    "command": ["x"],
                    "placement": {"pool": "own"},
                    "source": {"git": "https://example.invalid/r", "rev": "v1"},
                    "build_command": ["make"],
                    "build_scope": "shared",
                },
            ]
        }
    )
    own = p.unit("own").nodes
    head = p.unit("built").nodes
    assert sorted(p.local_dir_nodes()) == sorted({*own, *head})
    built = p.unit("built")
    assert built.build is not None and built.build.scope == "node"
    assert built.instances[0].cwd == f"{p.local_dir}/src/built/{head[0]}"
    shared = p.unit("shared-build")
    assert shared.build is not None and shared.build.scope == "shared"
    assert {i.cwd for i in shared.instances} == {f"{p.job_dir}/src/shared-build"}


def test_a_job_that_keeps_nothing_node_local_names_no_node(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan({"services": [{"name": "plain", "command": ["x"], "placement": {"node": "all"}}]})
    assert p.local_dir_nodes() == []
