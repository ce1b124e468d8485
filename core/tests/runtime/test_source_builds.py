"""Source builds on the local launcher, against a local bare git repository (no network)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from srt_services.extend import JobPaths
from srt_services.testing.jobs import Jobs, events_of


def git(*args: str, cwd: Path | None = None) -> str:
    out = subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[str, str, str]:
    """A bare repository with tag v1 (prints 'v1'), a later commit (prints 'v2') and the
    branch 'feature' at that later commit."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "app").mkdir()
    (work / "app" / "serve.py").write_text("print('version v1', flush=True)\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "v1", cwd=work)
    git("tag", "v1", cwd=work)
    v1 = git("rev-parse", "HEAD", cwd=work)
    (work / "app" / "serve.py").write_text("print('version v2', flush=True)\n")
    git("commit", "-qam", "v2", cwd=work)
    git("branch", "feature", cwd=work)
    v2 = git("rev-parse", "HEAD", cwd=work)
    bare = tmp_path / "repo.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    return str(bare), v1, v2


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    """Where the node-local checkouts go (the site config's ``[storage] node_local``)."""
    root = tmp_path / "node-local"
    root.mkdir()
    return root


@pytest.fixture
def site_env(tmp_path: Path, local_root: Path) -> dict[str, str]:
    config = tmp_path / "site.toml"
    config.write_text(f'[storage]\nnode_local = "{local_root}"\n', encoding="utf-8")
    return {"SRT_SITE_CONFIG": str(config)}


def recipe(git_url: str, rev: str, build: str = "echo built > built.txt", extra: str = "") -> str:
    return f"""
        schema: 2
        name: src
        observability:
          metrics: false
        services:
          - name: app
            terminal: true
            source: {{git: "{git_url}", rev: "{rev}", path: app}}
            build_command: [bash, -c, "{build}"]
            command: [bash, -c, "cat built.txt; echo cwd=$(pwd); python3 serve.py"]
            {extra}
        """


def cwd_of(log: str) -> str:
    return next(line for line in log.splitlines() if line.startswith("cwd="))[4:]


def test_clone_at_tag_build_once_and_run_from_the_checkout(
    jobs: Jobs, repo: tuple[str, str, str], site_env: dict[str, str], local_root: Path
) -> None:
    """The default build_scope (node) clones into node-local storage, which the job
    removes when it ends; the tag is resolved to its commit before the clone."""
    url, v1, _ = repo
    run = jobs.run(recipe(url, "v1"), env=site_env)
    assert run.code == 0, run.stderr
    out = run.log("service_app")
    assert "built" in out and "version v1" in out
    assert events_of(run, "rev_resolved", unit="app")[0]["commit"] == v1
    done = events_of(run, "checkout_done", unit="app")
    assert done and done[0]["commit"] == v1
    assert len(events_of(run, "build_started", unit="app")) == 1
    node_local = JobPaths(run.job_dir, os.path.basename(run.job_dir), str(local_root)).local_job_dir
    assert cwd_of(out) == f"{node_local}/src/app/node0/app"
    assert not os.path.exists(node_local), "node-local checkout left behind"
    assert not os.path.exists(os.path.join(run.job_dir, "src", "app"))


def test_node_scope_builds_on_every_node_of_the_placement(
    jobs: Jobs, repo: tuple[str, str, str], site_env: dict[str, str], local_root: Path
) -> None:
    url, _, _ = repo
    run = jobs.run(
        recipe(
            url,
            "v1",
            build="echo built-on-$SRT_NODE > built.txt",
            extra="nodes: 2",
        ),
        env=site_env,
    )
    assert run.code == 0, run.stderr
    builds = events_of(run, "build_started", unit="app")
    assert sorted(e["node"] for e in builds) == ["node0", "node1"]
    assert sorted(e["step"] for e in builds) == [
        "service_app_node0.build",
        "service_app_node1.build",
    ]
    node_local = JobPaths(run.job_dir, os.path.basename(run.job_dir), str(local_root)).local_job_dir
    for node in ("node0", "node1"):
        log = run.log(f"service_app_{node}")
        assert "version v1" in log
        assert cwd_of(log) == f"{node_local}/src/app/{node}/app"
        assert os.path.exists(os.path.join(run.job_dir, "logs", f"service_app_{node}.build.out"))
    assert not os.path.exists(node_local)


def test_shared_scope_builds_once_in_the_job_directory(
    jobs: Jobs, repo: tuple[str, str, str], site_env: dict[str, str]
) -> None:
    url, _, _ = repo
    run = jobs.run(
        recipe(url, "v1", extra="nodes: 2\n            build_scope: shared"), env=site_env
    )
    assert run.code == 0, run.stderr
    assert len(events_of(run, "build_started", unit="app")) == 1
    for node in ("node0", "node1"):
        log = run.log(f"service_app_{node}")
        assert cwd_of(log) == os.path.join(run.job_dir, "src", "app", "app")
        assert "built" in log


def shared(git_url: str, rev: str) -> str:
    return recipe(git_url, rev, extra="build_scope: shared")


def test_pinned_commit_is_checked_out_and_reused(jobs: Jobs, repo: tuple[str, str, str]) -> None:
    url, _, v2 = repo
    first = jobs.run(shared(url, v2))
    assert first.code == 0, first.stderr
    assert "version v2" in first.log("service_app")
    assert not events_of(first, "rev_resolved"), "a full SHA needs no resolving"
    second = jobs.run(shared(url, v2), job_dir=first.job_dir)
    assert second.code == 0
    assert events_of(second, "checkout_reused", unit="app")[0]["commit"] == v2


def test_existing_checkout_at_another_commit_is_replaced(
    jobs: Jobs, repo: tuple[str, str, str]
) -> None:
    url, v1, v2 = repo
    first = jobs.run(shared(url, v2))
    assert first.code == 0
    second = jobs.run(shared(url, v1), job_dir=first.job_dir)
    assert second.code == 0
    assert not events_of(second, "checkout_reused")
    assert events_of(second, "checkout_done")[0]["commit"] == v1
    assert "version v1" in second.log("service_app").split("built")[-1]


def test_build_failure_names_the_log(jobs: Jobs, repo: tuple[str, str, str]) -> None:
    url, _, _ = repo
    run = jobs.run(recipe(url, "v1", build="echo compiling; exit 4"))
    assert run.code == 1
    assert "services[app] build_command failed (exit 4)" in run.stderr
    assert "service_app.build.out" in run.stderr and "compiling" in run.stderr
    assert not events_of(run, "launched", unit="app")


def test_build_timeout_kills_the_build(jobs: Jobs, repo: tuple[str, str, str]) -> None:
    url, _, _ = repo
    run = jobs.run(recipe(url, "v1", build="sleep 1000", extra="build_timeout_seconds: 1"))
    assert run.code == 1
    assert "build_command timed out after 1s and was killed" in run.stderr


def test_unknown_rev_fails_before_the_clone(jobs: Jobs, repo: tuple[str, str, str]) -> None:
    url, _, _ = repo
    run = jobs.run(recipe(url, "v9"))
    assert run.code == 1
    assert "services[app].source.rev 'v9': 'v9' is not a tag or ref of" in run.stderr
    assert not events_of(run, "checkout_done")
    assert not os.path.exists(os.path.join(run.job_dir, "logs", "service_app.clone.out"))


def test_a_rev_that_is_a_branch_is_refused_before_the_clone(
    jobs: Jobs, repo: tuple[str, str, str]
) -> None:
    """`feature` passes the load-time rules (it could be a tag); the remote says it is a
    branch, so `srt run` refuses it as `srt apply` would, and nothing is cloned."""
    url, _, _ = repo
    run = jobs.run(recipe(url, "feature"))
    assert run.code == 1
    assert "'feature' is a branch of" in run.stderr and "a branch moves" in run.stderr
    assert not events_of(run, "build_started")
    assert not events_of(run, "launched", unit="app")


# A build that leaves a helper in a session of its own, with its environment scrubbed,
# records both PIDs, then waits: the helper must die with the build.
TREE_BUILD = (
    "setsid env -i sleep 1000 & echo $! >> {pids}; echo $$ >> {pids}; echo building; sleep 1000"
)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("path", ["cgroup", "fallback"])
def test_H09_stop_during_a_build_stops_its_whole_tree(
    jobs: Jobs, repo: tuple[str, str, str], tmp_path: Path, path: str
) -> None:
    """H09: a build is part of the job: srt status shows it running, and a stop during
    the build stops its whole tree (a setsid'd, cookie-less helper included)."""
    import json
    import os
    import signal
    import sys

    from srt_services.launch import process
    from srt_services.testing.jobs import wait_for
    from srt_services.testing.survivors import assert_no_survivors

    url, _, _ = repo
    pids = tmp_path / "pids"
    env = {"SRT_CGROUP": "off"} if path == "fallback" else None
    run = jobs.start(recipe(url, "v1", build=TREE_BUILD.format(pids=pids)), env=env)
    wait_for(lambda: len(_pids(pids)) == 2, timeout=30)
    status = subprocess.run(
        [sys.executable, "-m", "srt_services", "status", run.job_dir, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {r["step"]: r for r in json.loads(status.stdout)["instances"]}
    build = rows["service_app.build"]
    assert build["state"] == "building" and build["running"], rows
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143
    assert not [p for p in _pids(pids) if process.alive(p)]
    assert_no_survivors(run.job_dir, also=_pids(pids))
    assert os.path.exists(os.path.join(run.job_dir, "result.json"))


def test_H09_a_build_past_its_timeout_is_killed_with_its_children(
    jobs: Jobs, repo: tuple[str, str, str], tmp_path: Path
) -> None:
    """H09: the timeout kills the build's whole tree, not only its process group."""
    from srt_services.launch import process
    from srt_services.testing.survivors import assert_no_survivors

    url, _, _ = repo
    pids = tmp_path / "pids"
    run = jobs.run(
        recipe(url, "v1", build=TREE_BUILD.format(pids=pids), extra="build_timeout_seconds: 2")
    )
    assert run.code == 1
    assert "build_command timed out after 2s and was killed" in run.stderr
    assert len(_pids(pids)) == 2
    assert not [p for p in _pids(pids) if process.alive(p)]
    assert_no_survivors(run.job_dir, also=_pids(pids))
