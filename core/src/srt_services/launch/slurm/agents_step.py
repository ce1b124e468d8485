"""The agents' step as ``srun`` starts it: what the orchestrator and the batch script's
first moments (:mod:`.first`) both build, kept light (no asyncio) so the batch script can
start the agents before the orchestrator's own start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

#: The agents' step name (``squeue -s`` shows it).
AGENTS_STEP = "srt-agents"
#: The agent key's file in the job directory (mode 0600, a new key every run).
KEY_FILE = ".srt-agents.key"
#: Set to 1 by the batch script when its plan starts instances through agents: the
#: agents then start with the allocation, and say their nodes' addresses (sbatch.py).
EARLY_VAR = "SRT_SLURM_AGENTS"
#: Set by :mod:`.first` when it started the agents before the orchestrator: the listening
#: socket's descriptor the orchestrator inherits, and ``PID:LOG_OFFSET`` of their srun.
LISTEN_FD_VAR = "SRT_AGENTS_LISTEN_FD"
SRUN_VAR = "SRT_AGENTS_SRUN"
#: What the agents' srun passes on to them from the orchestrator's environment (besides
#: what Slurm's client commands need): what the interpreter needs to start, and the cgroup
#: switch.
AGENT_ENV = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "TMPDIR", "SRT_CGROUP")


class FleetConfig:
    """What the agents' step and the orchestrator's side of the agents need to know.

    A plain class, not a dataclass: the batch script's first program builds one before it
    starts the agents, and the dataclasses module (with inspect) was ~10 ms of that."""

    __slots__ = (
        "advertise",
        "bind",
        "cookie",
        "env",
        "interface",
        "job_dir",
        "job_id",
        "job_name",
        "local_dir",
        "lost_after",
        "nodes",
        "python",
        "srun_extra",
        "start_timeout",
    )

    def __init__(
        self,
        *,
        job_id: str,
        job_name: str,
        job_dir: str,
        cookie: str,
        nodes: Sequence[str],
        advertise: str,
        bind: str,
        local_dir: str | None,
        start_timeout: float,
        lost_after: float,
        srun_extra: Sequence[str] = (),
        python: str = "",
        env: Mapping[str, str] | None = None,
        interface: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.job_name = job_name
        self.job_dir = job_dir
        self.cookie = cookie
        self.nodes = nodes
        #: the orchestrator's own address (the agents connect to it) and where to bind
        self.advertise = advertise
        self.bind = bind
        self.local_dir = local_dir
        self.start_timeout = start_timeout
        self.lost_after = lost_after
        self.srun_extra = srun_extra
        self.python = python
        self.env: Mapping[str, str] = {} if env is None else env
        #: the site's ``[slurm] network_interface`` (early agents report its address)
        self.interface = interface


def agents_argv(
    cfg: FleetConfig, port: int, key_file: str, srun: str = "srun", early: bool = False
) -> list[str]:
    """The one ``srun`` that starts an agent on every node: overlapping the job's other
    steps, with all of the job's resources on each node (an instance may use any of
    them, as its own step could), unbound, and kept going when one node fails
    (``--no-kill``: without it a node failure ends the step on every node). ``early``:
    started with the allocation, each agent says its node's address in its hello and
    waits for its setup while the orchestrator plans."""
    nodes = list(cfg.nodes)
    extra: list[str] = []
    if early:
        extra = ["--report-address", "--setup-within", f"{max(cfg.start_timeout, 10.0):g}"]
        if cfg.interface:
            extra += ["--interface", cfg.interface]
    return [
        srun,
        f"--jobid={cfg.job_id}",
        "--overlap",
        "--whole",
        "--no-kill",
        "--kill-on-bad-exit=0",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        f"--job-name={AGENTS_STEP}",
        f"--output={cfg.job_dir}/logs/srt-agent-%N.out",
        "--open-mode=append",
        "--export=ALL",
        *cfg.srun_extra,
        *agent_command(cfg.python),
        "--connect",
        f"{cfg.advertise}:{port}",
        "--key-file",
        key_file,
        "--job-dir",
        cfg.job_dir,
        "--log-dir",
        f"{cfg.job_dir}/logs",
        *extra,
    ]


def agent_command(python: str) -> list[str]:
    """How the agents' step runs the agent: without the ``site`` module (``-S``) and with
    the directory this srt was imported from put first on its path, not through ``-m``.

    Every node pays the agent's start before its instances can launch: the ``site``
    module's processing of the environment's ``.pth`` files (one per editable install)
    and ``runpy`` were ~8 ms of each agent's ~50 ms of CPU to its hello. The agent runs
    ``site.main()`` itself once its instances are launched (the rest of it may need the
    environment's third-party packages). Where srt is not a plain directory on the path
    (a zip, say), it runs as ``python -m srt_services.launch.agent``, as before."""
    import srt_services

    root = os.path.dirname(os.path.dirname(os.path.abspath(srt_services.__file__)))
    if not os.path.isfile(os.path.join(root, "srt_services", "launch", "agent", "__main__.py")):
        return [python, "-m", "srt_services.launch.agent"]
    boot = (
        f"import sys; sys.path.insert(0, {root!r});"
        " from srt_services.launch.agent.__main__ import run; run()"
    )
    return [python, "-S", "-c", boot]
