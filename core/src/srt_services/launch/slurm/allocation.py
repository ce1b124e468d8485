"""The allocation as srt sees it: node names from Slurm, node addresses resolved once.

Names come from ``scontrol show hostnames $SLURM_JOB_NODELIST``. Addresses are asked of the
nodes themselves, all at once (one ``srun`` step across the nodes, not one after another),
read from stdout only (srun's own chatter goes to stderr and is never mistaken for an
address), and cached in the job directory so a job resolves them exactly once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping

from srt_services.contracts.allocation import Allocation
from srt_services.contracts.context import Node
from srt_services.errors import SrtError
from srt_services.launch.slurm.batchhost import pick_ipv4, slurm_env

RESOLVE_TIMEOUT = 30.0


class SlurmError(SrtError):
    pass


def run(argv: list[str], timeout: float = 30.0) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False
        )
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} is not installed (is this a Slurm client machine?)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv)} did not answer within {timeout:g}s") from None
    if out.returncode != 0:
        raise SlurmError(f"{' '.join(argv)} failed: {out.stderr.strip() or out.returncode}")
    return out.stdout


def hostnames(nodelist: str) -> list[str]:
    names = [
        n.strip() for n in run(["scontrol", "show", "hostnames", nodelist]).split() if n.strip()
    ]
    if not names:
        raise SlurmError(f"SLURM_JOB_NODELIST {nodelist!r} names no nodes")
    return names


def resolve_ips(job_id: str, nodes: list[str], interface: str | None = None) -> dict[str, str]:
    """Ask every node for its address, all at once, in one step across the allocation:
    one ``srun`` client on the batch host and one step for slurmctld, whatever the node
    count (one ``srun`` per node would cost the batch host a client of ~8 MiB per node).
    Each task prefixes every line with its node's name, so no task order is assumed."""
    probe = f"ip -4 -o addr show dev {shlex.quote(interface)}" if interface else "hostname -I"
    argv = [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        "--no-kill",
        "--kill-on-bad-exit=0",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        "--job-name=srt-resolve-ip",
        "--export=ALL",
        "sh",
        "-c",
        # every line carries the node's name (``ip -o`` prints one line per address)
        f'{probe} | while IFS= read -r l; do printf "%s %s\\n" "$SLURMD_NODENAME" "$l"; done',
    ]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=slurm_env(),
            timeout=RESOLVE_TIMEOUT,
            check=False,
        )
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = _text(exc.stdout)
        stderr = _text(exc.stderr) + f" (no answer within {RESOLVE_TIMEOUT:g}s)"
    except FileNotFoundError:
        raise SlurmError("srun is not installed (is this a Slurm client machine?)") from None
    said: dict[str, str] = {}
    for line in stdout.splitlines():
        node, _, rest = line.partition(" ")
        if node in nodes:
            said[node] = said.get(node, "") + rest + "\n"
    out: dict[str, str] = {}
    problems = []
    for node in nodes:
        ip = pick_ipv4(said.get(node, ""))
        if ip is None:
            shown = said.get(node, "").strip()
            problems.append(f"{node}: no address in {shown!r} ({stderr.strip()[-200:]})")
            continue
        out[node] = ip
    if problems:
        raise SlurmError("cannot resolve node addresses: " + "; ".join(problems))
    return out


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


#: Asked for the nodes' addresses before the lookup step: job id, node names -> the text
#: each node said its address in (the agents started with the allocation say it).
AddressSource = Callable[[str, list[str]], Mapping[str, str]]


def current_allocation(
    job_dir: str,
    interface: str | None = None,
    env: Mapping[str, str] | None = None,
    told: AddressSource | None = None,
) -> Allocation:
    """The allocation's nodes and their addresses: from ``told`` (the early agents), else
    from the job directory's cache, else from one lookup step across the nodes (for the
    nodes ``told`` did not cover too)."""
    src = os.environ if env is None else env
    job_id = src.get("SLURM_JOB_ID")
    nodelist = src.get("SLURM_JOB_NODELIST")
    if not job_id or not nodelist:
        raise SlurmError(
            "not inside a Slurm allocation (SLURM_JOB_ID is not set); submit with `srt apply`"
        )
    cache = os.path.join(job_dir, "nodes.json")
    names = hostnames(nodelist)
    ips: dict[str, str] = {}
    if told is not None:
        said = told(job_id, names)
        ips = {n: ip for n in names if (ip := pick_ipv4(said.get(n, ""))) is not None}
        missing = [n for n in names if n not in ips]
        if missing:
            ips.update(resolve_ips(job_id, missing, interface))
        _write_cache(cache, job_id, ips)
        return Allocation("slurm", tuple(Node(n, ips[n], i) for i, n in enumerate(names)), job_id)
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = json.load(fh)
        if cached.get("job_id") == job_id and sorted(cached.get("ips", {})) == sorted(names):
            ips = cached["ips"]
    except (OSError, ValueError):
        pass
    if not ips:
        ips = resolve_ips(job_id, names, interface)
        _write_cache(cache, job_id, ips)
    return Allocation("slurm", tuple(Node(n, ips[n], i) for i, n in enumerate(names)), job_id)


def _write_cache(path: str, job_id: str, ips: Mapping[str, str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"job_id": job_id, "ips": dict(ips)}, fh, indent=2)


def kill_wait() -> float:
    """The cluster's KillWait (seconds between a job's SIGTERM and its SIGKILL)."""
    text = run(["scontrol", "show", "config"])
    m = re.search(r"^KillWait\s*=\s*(\d+)", text, re.MULTILINE)
    return float(m.group(1)) if m else 30.0
