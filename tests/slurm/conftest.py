"""Session fixtures that give tests a real, private Slurm cluster.

The clusters are started by ``scripts/slurm_cluster.py`` (Debian's Slurm 22.05, run by
hand as root) and torn down when the session ends.  Each session picks its own cluster
names, so two sessions on one machine (two engineers, or xdist workers) get separate
clusters instead of stopping each other's.  A cluster whose owning session died without
tearing down (SIGKILL, OOM) is reaped by the next session.

When a cluster cannot be started the tests that need it are skipped, or, with
``SRT_REQUIRE_SLURM=1`` (set in CI), they error, so a broken CI machine cannot pass by
skipping everything.

Teardown keeps the cluster directory (daemon logs) when a test failed, for the
post-mortem; ``SRT_SLURM_KEEP=1`` always keeps it, ``SRT_SLURM_KEEP=0`` never does.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import pytest
from srt_services.contracts.context import JobPaths
from srt_services.jobdir.events import read_events
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.state import JobState, read_state
from srt_services.testing.survivors import survivors

T = TypeVar("T")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm_cluster.py"
# /tmp is world-traversable, which munged insists on for its socket directory;
# pytest's tmp_path (0700) is not.
DIR_PREFIX = "/tmp/srt-slurm-"
OWNER_FILE = "owner.json"


def _load_cluster_module() -> ModuleType:
    """Import scripts/slurm_cluster.py by path: scripts/ is not a package."""
    name = "srt_slurm_cluster"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    # dataclasses look the module up in sys.modules while the class is created
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


sc = _load_cluster_module()
Cluster = sc.Cluster


# --------------------------------------------------------------------------- helpers


def wait_until(
    pred: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = ""
) -> T:
    """Poll `pred` until it returns something truthy and return that value.

    Raises TimeoutError naming `what` (or the predicate) so a failing test says what it
    was waiting for.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            label = what or getattr(pred, "__name__", repr(pred))
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {label}")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    """Running and not a zombie (PID 1 here reaps orphans only after a few seconds)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2 : raw.rfind(")") + 3] not in ("Z", "X")


def _start_time(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return int(raw[raw.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclasses.dataclass
class SlurmShell:
    """Runs Slurm client commands against one cluster (SLURM_CONF set, no stray SLURM_*)."""

    cluster: Any
    alive = staticmethod(pid_alive)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.cluster.env())

    def run(
        self, *argv: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            list(argv),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {res.returncode}: {res.stderr.strip() or res.stdout}"
            )
        return res

    def sbatch(self, script: str | Path, *args: str) -> str:
        return self.run("sbatch", "--parsable", *args, str(script)).stdout.strip().split(";")[0]

    def job_state(self, job: str) -> str:
        """JobState from the controller; finished jobs stay visible for MinJobAge."""
        out = self.run("scontrol", "show", "job", "-o", job, check=False).stdout
        for tok in out.split():
            if tok.startswith("JobState="):
                return tok.split("=", 1)[1]
        return "UNKNOWN"

    def steps(self, job: str) -> dict[str, tuple[str, str]]:
        """{step id: (step name, node list)} of the job's running steps."""
        out = self.run("squeue", "-s", "-h", "-j", job, "-o", "%i %j %N").stdout
        steps: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3:
                steps[parts[0]] = (parts[1], parts[2])
        return steps

    def config(self) -> dict[str, str]:
        out = self.run("scontrol", "show", "config").stdout
        conf: dict[str, str] = {}
        for line in out.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                conf[key.strip()] = value.strip()
        return conf

    def job_pids(self, job: str) -> set[int]:
        """Live processes of a job, found by SLURM_JOB_ID in their environment.

        This also finds setsid'd daemons that left the step's process tree.
        """
        want_job = f"SLURM_JOB_ID={job}".encode()
        want_conf = f"SLURM_CONF={self.cluster.slurm_conf}".encode()
        found: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if want_job in env and want_conf in env and pid_alive(int(entry)):
                found.add(int(entry))
        return found


# --------------------------------------------------------------------------- jobs

#: Slurm job states after which nothing of the job runs any more.
DONE = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


class SlurmJob:
    """One ``srt apply`` on a test cluster, and what it left in its job directory."""

    def __init__(
        self, shell: SlurmShell, job_id: str, job_dir: Path, applied: dict[str, Any] | None = None
    ) -> None:
        self.shell = shell
        self.job_id = job_id
        self.job_dir = job_dir
        #: What ``srt apply --json`` printed (``job_id``, ``nodes``...).
        self.applied = applied or {}

    def events(self, name: str | None = None, **match: Any) -> list[dict[str, Any]]:
        evs = read_events(str(self.job_dir / "events.jsonl"))
        return [
            e
            for e in evs
            if (name is None or e["event"] == name) and all(e.get(k) == v for k, v in match.items())
        ]

    def wait_event(self, name: str, timeout: float = 60.0, **match: Any) -> dict[str, Any]:
        """The first such event; fails at ``timeout``, or as soon as the job has ended
        without writing it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self.state() in DONE
            found = self.events(name, **match)  # after the state: a last event is seen
            if found:
                return found[0]
            if done:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {name} {match} event; log:\n{self.sbatch_log()}")

    def state(self) -> str:
        return str(self.shell.job_state(self.job_id))

    def wait_done(self, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if state in DONE:
                return state
            time.sleep(0.2)
        raise AssertionError(
            f"job {self.job_id} still {self.state()} after {timeout}s:\n{self.sbatch_log()}"
        )

    def result(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.job_dir / "result.json").read_text())
        return data

    def plan(self) -> dict[str, Any]:
        """``plan.json``, as the orchestrator in the allocation planned the job."""
        data: dict[str, Any] = json.loads((self.job_dir / "plan.json").read_text())
        return data

    def sbatch_log(self) -> str:
        try:
            return (self.job_dir / "logs" / "sbatch.out").read_text()
        except OSError:
            return "(no sbatch.out)"

    def log(self, step: str) -> str:
        return (self.job_dir / "logs" / f"{step}.out").read_text()

    def srt_state(self) -> JobState:
        """``state.json``, as the orchestrator in the allocation wrote it."""
        state = read_state(JobDir(str(self.job_dir)))
        assert state is not None, f"no state.json yet:\n{self.sbatch_log()}"
        return state

    def instance_pid(self, step: str, within: float = 10.0) -> int:
        """The instance's PID as ``state.json`` records it. Under the agents launcher it
        comes with the agent's "started" message, which may be handled just after the
        orchestrator saw the instance's log line on the shared file system: wait for it."""
        deadline = time.monotonic() + within
        while (pid := self.srt_state().instances[step].pid) is None:
            assert time.monotonic() < deadline, f"no PID of {step} in state.json after {within} s"
            time.sleep(0.05)
        return pid

    def node_local(self, root: str = "/tmp") -> str:
        """The job's node-local directory (``{local_dir}``'s parent) under ``root``; the
        netns nodes share this machine's file system, so it is visible from here."""
        return JobPaths(str(self.job_dir), self.job_id, root).local_job_dir

    def assert_nothing_left(self, timeout: float = 30.0) -> None:
        """No process carries the job's SLURM_JOB_ID or its srt cookie any more."""
        wait_until(lambda: not self.shell.job_pids(self.job_id), timeout, what="job processes gone")
        wait_until(lambda: not survivors(str(self.job_dir)), timeout=10, what="cookie holders gone")


def apply(
    shell: SlurmShell, recipe: Path, job_dir: Path, env: dict[str, str] | None = None
) -> SlurmJob:
    """``srt apply RECIPE -o JOB_DIR`` against ``shell``'s cluster."""
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "apply", str(recipe), "-o", str(job_dir), "--json"],
        capture_output=True,
        text=True,
        env={**shell.env, **(env or {})},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    applied = json.loads(out.stdout)
    return SlurmJob(shell, applied["job_id"], job_dir, applied)


@pytest.fixture
def shell(slurm_cluster_3: Any) -> SlurmShell:
    """Slurm's commands against the 3-node cluster, the one ``submit`` submits to."""
    return SlurmShell(slurm_cluster_3)


@pytest.fixture
def submit(shell: SlurmShell, tmp_path: Path) -> Iterator[Callable[..., SlurmJob]]:
    """``submit(recipe, name="job", extra_env=None)``: ``srt apply`` on the 3-node cluster of
    recipe text (dedented, written to ``NAME.yaml``) or of a recipe file (a ``Path``), job
    directory ``NAME-dir``. At teardown a job still running is cancelled, and nothing of any
    job may be left: its processes, its cookie holders, its nodes' node-local trees."""
    submitted: list[SlurmJob] = []

    def _submit(
        recipe: str | Path, name: str = "job", extra_env: dict[str, str] | None = None
    ) -> SlurmJob:
        if isinstance(recipe, str):
            path = tmp_path / f"{name}.yaml"
            path.write_text(textwrap.dedent(recipe))
            recipe = path
        job = apply(shell, recipe, tmp_path / f"{name}-dir", extra_env)
        submitted.append(job)
        return job

    yield _submit
    for job in submitted:
        if job.state() not in DONE:
            shell.run("scancel", job.job_id, check=False)
        # Ray keeps ~20 processes a node: give them longer than a plain job's
        job.assert_nothing_left(timeout=60)
        # a killed job cannot remove its nodes' trees, which are on this machine's /tmp
        shutil.rmtree(job.node_local(), ignore_errors=True)


# --------------------------------------------------------------------------- cluster fixtures


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("SRT_REQUIRE_SLURM") == "1":
        pytest.fail(f"Slurm test cluster required (SRT_REQUIRE_SLURM=1): {reason}", pytrace=False)
    pytest.skip(f"Slurm test cluster unavailable: {reason}")


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _reap_stale_clusters() -> None:
    """Stop clusters left behind by sessions that died before their teardown ran."""
    for d in Path("/tmp").glob("srt-slurm-*"):
        try:
            owner = json.loads((d / OWNER_FILE).read_text())
            pid, started = int(owner["pid"]), owner["start_time"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid_alive(pid) and _start_time(pid) == started:
            continue  # another live session's cluster
        try:
            sc.down(d)
        except Exception:
            continue
        shutil.rmtree(d, ignore_errors=True)


_reaped = False


def _bring_up(request: pytest.FixtureRequest, nodes: int, mode: str) -> Iterator[Any]:
    global _reaped
    if sys.platform != "linux" or os.geteuid() != 0:
        _unavailable("needs root on Linux (slurmd, network namespaces, cgroups)")
    if not _reaped:
        _reaped = True
        _reap_stale_clusters()
    name = f"t{nodes}{_b36(os.getpid())}"
    d = Path(f"{DIR_PREFIX}{name}")
    d.mkdir(mode=0o755, exist_ok=True)
    (d / OWNER_FILE).write_text(
        json.dumps({"pid": os.getpid(), "start_time": _start_time(os.getpid())})
    )

    def teardown() -> None:
        sc.down(d)
        if request.session.testsfailed and os.environ.get("SRT_SLURM_KEEP") != "0":
            # keep the daemons' logs for the post-mortem; the next session reaps the dir
            print(f"\nslurm cluster logs kept in {d}/log", file=sys.stderr)
        elif os.environ.get("SRT_SLURM_KEEP") != "1":
            shutil.rmtree(d, ignore_errors=True)

    # registered before `up` so that a half-started cluster is stopped too
    request.addfinalizer(teardown)
    try:
        cluster = sc.up(d, nodes=nodes, mode=mode, name=name, timeout=60, smoke=True)
    except Exception as exc:
        _unavailable(f"{nodes}-node {mode} cluster did not start: {exc}")
    yield cluster


@pytest.fixture(scope="session")
def slurm_cluster_1(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One node in local mode (the node is this host: same IP, hostname, ports)."""
    yield from _bring_up(request, 1, "local")


@pytest.fixture(scope="session")
def slurm_cluster_3(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Three nodes n1..n3, each in its own network namespace with a 10.x IP and hostname."""
    yield from _bring_up(request, 3, "netns")


@pytest.fixture(scope="session")
def slurm_env() -> Callable[[Any], SlurmShell]:
    """`slurm_env(cluster)` gives a SlurmShell to run sbatch/squeue/... against it."""
    return SlurmShell


@pytest.fixture(name="wait_until", scope="session")
def wait_until_fixture() -> Callable[..., Any]:
    """The wait_until helper for test modules (conftest is not importable by name)."""
    return wait_until


@pytest.fixture(scope="session")
def slurm_cluster_api() -> ModuleType:
    """The scripts/slurm_cluster.py module (up/down/is_up/Cluster)."""
    return sc
