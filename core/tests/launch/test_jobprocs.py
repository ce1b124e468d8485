"""What each look at a job's processes can see (no cgroup): ``below`` walks the
orchestrator's own tree (what a child subreaper holds), ``find`` reads every process of the
machine, so it alone finds what left the tree (an orphan re-parented to PID 1 when nothing
re-parented it to us)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from srt_services import procfs
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.launch import jobprocs, process

COOKIE = "c" * 32

#: A service: a child in its session, an orphan left in its session, and an orphan in a
#: session of its own that carries the cookie; each writes "label pid" to argv[1].
TREE = r"""
import os, sys, time
path = sys.argv[1]
def rec(label):
    with open(path, "a") as fh:
        fh.write(f"{label} {os.getpid()}\n")
def stay(label):
    rec(label)
    while True:
        time.sleep(1)
if os.fork() == 0:
    stay("child")
if os.fork() == 0:
    if os.fork() == 0:
        stay("orphan-same-session")
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        stay("orphan-own-session")
    os._exit(0)
stay("service")
"""


def _recorded(path: Path, count: int) -> dict[str, int]:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        lines = path.read_text().split("\n") if path.exists() else []
        got = dict(line.split() for line in lines if line.strip())
        if len(got) >= count:
            return {k: int(v) for k, v in got.items()}
        time.sleep(0.01)
    raise AssertionError(f"the tree did not come up: {path.read_text()}")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[dict[str, int]]:
    path = tmp_path / "pids"
    env = {**os.environ, COOKIE_VAR: COOKIE, INSTANCE_VAR: "service_a"}
    service = subprocess.Popen(
        [sys.executable, "-c", TREE, str(path)], env=env, start_new_session=True
    )
    pids = _recorded(path, 4)
    yield pids
    for pid in pids.values():
        process.signal_pid(pid, signal.SIGKILL)
    service.wait()


def test_the_walk_sees_the_tree_and_only_the_tree(tree: dict[str, int]) -> None:
    """Here this process is not a subreaper: the orphans went to PID 1 (or whichever
    subreaper is above), out of the walk's sight."""
    assert not process.is_subreaper(), "an in-process orchestrator left this process a subreaper"
    sid = tree["service"]
    got = jobprocs.below(os.getpid(), COOKIE, sessions={sid: "service_a"})
    assert tree["service"] in got and tree["child"] in got
    assert got[tree["child"]] == "service_a"
    assert tree["orphan-same-session"] not in got
    assert tree["orphan-own-session"] not in got


def test_the_full_scan_finds_what_left_the_tree(tree: dict[str, int]) -> None:
    """The session srt created finds one orphan, the cookie the other (the teardown's last
    look, and ``srt stop`` after the orchestrator died)."""
    sid = tree["service"]
    got = jobprocs.find(
        COOKIE, sessions={sid: "service_a"}, not_before=procfs.start_ticks(os.getpid())
    )
    assert set(tree.values()) <= set(got)
    assert got[tree["orphan-same-session"]] == "service_a"
    assert got[tree["orphan-own-session"]] == "service_a"  # its cookie names its instance
    without_cookie = jobprocs.find(COOKIE, sessions={sid: "service_a"}, by_cookie=False)
    assert tree["orphan-own-session"] not in without_cookie


def test_the_walk_skips_an_instances_group_but_not_what_escaped_it(tree: dict[str, int]) -> None:
    got = jobprocs.below(os.getpid(), COOKIE, skip={tree["service"]})
    assert tree["service"] not in got and tree["child"] not in got


SUBREAPER = r"""
import json, os, sys, time
from srt_services.launch import jobprocs, process
was = process.is_subreaper()
assert process.become_subreaper()
now = process.is_subreaper()
service = os.fork()
if service == 0:
    os.setsid()
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    time.sleep(600)
time.sleep(0.3)  # the middle process has exited; its child is ours now
got = jobprocs.below(os.getpid(), "x" * 32, sessions={service: "s"})
print(json.dumps({"was": was, "now": now, "service": service, "got": got}), flush=True)
os.killpg(service, 9)
"""


def test_as_subreaper_the_walk_holds_every_orphan() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=60, check=True
    )
    doc = json.loads(out.stdout)
    assert doc["was"] is False and doc["now"] is True
    got = {int(k): v for k, v in doc["got"].items()}
    assert doc["service"] in got
    orphans = [p for p in got if p != doc["service"]]
    assert len(orphans) == 1, got
    assert got[orphans[0]] == "s"  # its session is the service's
    end = time.monotonic() + 10
    while procfs.alive(orphans[0]) and time.monotonic() < end:
        time.sleep(0.01)
    assert not procfs.alive(orphans[0])
