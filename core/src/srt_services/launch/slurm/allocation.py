"""The allocation as srt sees it: node names from Slurm, node addresses resolved once.

Names come from ``scontrol show hostnames $SLURM_JOB_NODELIST``. Addresses are asked of the
nodes themselves, all at once (one ``srun`` per node in parallel, not one after another),
read from stdout only (srun's own chatter goes to stderr and is never mistaken for an
address), and cached in the job directory so a job resolves them exactly once.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
from collections.abc import Mapping

from srt_services.contracts.allocation import Allocation
from srt_services.contracts.context import Node
from srt_services.errors import SrtError

RESOLVE_TIMEOUT = 30.0
_IPV4 = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3})\b")


class SlurmError(SrtError):
    pass


def slurm_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a Slurm client command needs from our environment (and nothing else)."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in ("PATH", "HOME", "LANG", "SLURM_CONF") if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


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


def pick_ipv4(text: str) -> str | None:
    """First non-loopback IPv4 address in ``text``."""
    for token in _IPV4.findall(text):
        try:
            addr = ipaddress.IPv4Address(token)
        except ValueError:
            continue
        if not addr.is_loopback and not addr.is_unspecified:
            return str(addr)
    return None


def resolve_ips(job_id: str, nodes: list[str], interface: str | None = None) -> dict[str, str]:
    """Ask every node for its address, in parallel."""
    probe = (
        ["ip", "-4", "-o", "addr", "show", "dev", interface] if interface else ["hostname", "-I"]
    )
    procs = {
        node: subprocess.Popen(
            [
                "srun",
                f"--jobid={job_id}",
                "--overlap",
                "--nodes=1",
                "--ntasks=1",
                f"--nodelist={node}",
                "--job-name=srt-resolve-ip",
                "--export=ALL",
                *probe,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=slurm_env(),
        )
        for node in nodes
    }
    out: dict[str, str] = {}
    problems = []
    for node, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=RESOLVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            problems.append(f"{node}: no answer within {RESOLVE_TIMEOUT:g}s")
            continue
        ip = pick_ipv4(stdout)
        if ip is None:
            problems.append(f"{node}: no address in {stdout.strip()!r} ({stderr.strip()[-200:]})")
            continue
        out[node] = ip
    if problems:
        raise SlurmError("cannot resolve node addresses: " + "; ".join(problems))
    return out


def current_allocation(
    job_dir: str, interface: str | None = None, env: Mapping[str, str] | None = None
) -> Allocation:
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
    try:
        with open(cache, encoding="utf-8") as fh:
            cached = json.load(fh)
        if cached.get("job_id") == job_id and sorted(cached.get("ips", {})) == sorted(names):
            ips = cached["ips"]
    except (OSError, ValueError):
        pass
    if not ips:
        ips = resolve_ips(job_id, names, interface)
        os.makedirs(job_dir, exist_ok=True)
        with open(cache, "w", encoding="utf-8") as fh:
            json.dump({"job_id": job_id, "ips": ips}, fh, indent=2)
    return Allocation("slurm", tuple(Node(n, ips[n], i) for i, n in enumerate(names)), job_id)


def kill_wait() -> float:
    """The cluster's KillWait (seconds between a job's SIGTERM and its SIGKILL)."""
    text = run(["scontrol", "show", "config"])
    m = re.search(r"^KillWait\s*=\s*(\d+)", text, re.MULTILINE)
    return float(m.group(1)) if m else 30.0
