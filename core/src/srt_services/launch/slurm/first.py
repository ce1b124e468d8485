"""``python -m srt_services.launch.slurm.first [options] -- ORCHESTRATOR...``: the batch
script's first moments when its plan starts instances through node agents.

Starting a Python agent on every node is most of a large job's launch, and the
orchestrator's own start-up (its imports, the recipe, the plugins) is time during which
the agents could already be starting. So the batch script runs this small program first:
it listens on the batch host's address (the port the kernel picks), writes the job's agent
key, starts the agents' step pointed at that port, and then ``exec``s the orchestrator,
which inherits the listening socket (its descriptor and the srun's PID in the
environment) and takes the agents' hellos over where it would otherwise have started them
itself (:func:`srt_services.launch.slurm.agents.start_early`). Being the same process (an
``exec``), the orchestrator stays the batch shell Slurm signals, and the srun stays its
child.

Anything that goes wrong here only means the orchestrator starts the agents itself: the
program never keeps the job from starting.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from srt_services.launch.agent import wire
from srt_services.launch.slurm.agents_step import (
    AGENT_ENV,
    KEY_FILE,
    LISTEN_FD_VAR,
    SRUN_VAR,
    FleetConfig,
    agents_argv,
)
from srt_services.launch.slurm.batchhost import local_address, slurm_env

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _nodes(nodelist: str) -> list[str]:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [n for n in out.stdout.split() if n]


def start(job_dir: str, interface: str | None, start_timeout: float, extra: list[str]) -> None:
    """Listen, write the key, start the agents' step; leave in this process's environment
    what the orchestrator needs to take them over."""
    job_id = os.environ["SLURM_JOB_ID"]
    nodes = _nodes(os.environ["SLURM_JOB_NODELIST"])
    address = local_address(interface)
    listener = socket.create_server(
        (address or "0.0.0.0", 0),  # noqa: S104 - agents on other nodes connect here
        backlog=max(128, len(nodes) + 16),
    )
    key_file = os.path.join(job_dir, KEY_FILE)
    wire.write_key(key_file)
    src = os.environ
    env = {**slurm_env(), **{k: src[k] for k in AGENT_ENV if k in src}}
    cfg = FleetConfig(
        job_id=job_id,
        job_name="",
        job_dir=job_dir,
        cookie="",
        nodes=nodes,
        advertise=address or "127.0.0.1",
        bind="",
        local_dir=None,
        start_timeout=start_timeout,
        lost_after=0.0,
        srun_extra=extra,
        python=sys.executable,
        interface=interface,
    )
    argv = agents_argv(cfg, listener.getsockname()[1], key_file, early=True)
    log = os.path.join(job_dir, "logs", "srt-agents.out")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        offset = os.lseek(fd, 0, os.SEEK_END)
        srun = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    os.set_inheritable(listener.fileno(), True)
    os.environ[LISTEN_FD_VAR] = str(listener.detach())
    os.environ[SRUN_VAR] = f"{srun.pid}:{offset}"


def _options(args: list[str]) -> dict[str, Any]:
    """The options srt's batch script writes (by hand: argparse, with the regular
    expressions and gettext it loads, was ~20 ms before the agents could start)."""
    opts: dict[str, Any] = {"interface": None, "start_timeout": "60", "srun_extra": []}
    names = {"--job-dir", "--interface", "--start-timeout", "--srun-extra"}
    rest = list(args)
    while rest:
        name, eq, value = rest.pop(0).partition("=")
        if name not in names:
            raise ValueError(f"unknown option {name}")
        if not eq:
            if not rest:
                raise ValueError(f"{name} needs a value")
            value = rest.pop(0)
        key = name[2:].replace("-", "_")
        if key == "srun_extra":
            opts[key].append(value)
        else:
            opts[key] = value
    if "job_dir" not in opts:
        raise ValueError("--job-dir is required")
    float(opts["start_timeout"])
    return opts


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print("usage: first [options] -- ORCHESTRATOR...", file=sys.stderr)
        return 2
    at = args.index("--")
    mine, orchestrator = args[:at], args[at + 1 :]
    try:
        opts = _options(mine)
    except ValueError as exc:
        print(f"usage: first --job-dir DIR [options] -- ORCHESTRATOR... ({exc})", file=sys.stderr)
        return 2
    try:
        start(opts["job_dir"], opts["interface"], float(opts["start_timeout"]), opts["srun_extra"])
    except Exception as exc:  # the orchestrator starts them itself: say why, go on
        print(f"srt: the agents start with the orchestrator instead ({exc})", file=sys.stderr)
        os.environ.pop(LISTEN_FD_VAR, None)
        os.environ.pop(SRUN_VAR, None)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(orchestrator[0], orchestrator)  # noqa: S606 - the orchestrator, as rendered
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
