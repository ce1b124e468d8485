"""Who holds a port, and is it a leftover of an earlier srt job?

Run locally by the local launcher and on each node (through ``srun``) by the Slurm launcher
before a phase starts: ``python -m srt_services.launch.portcheck ADDR:PORT...`` prints one
JSON document. A holder is a *stale leftover* only when it carries an srt job cookie and
that job is provably over (its orchestrator is gone, or Slurm no longer runs its job);
anything else is reported and left alone. ``--reap PID:START_TICKS`` kills such a leftover,
checking the start time first so a reused PID is never hit.
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.launch import process

WILDCARDS = {"0.0.0.0", "::", "::ffff:0.0.0.0"}  # noqa: S104 - matched, never bound


@dataclass(slots=True)
class Holder:
    pid: int | None
    address: str
    uid: int | None = None
    cmdline: str = ""
    start_ticks: int | None = None
    cookie: str | None = None
    instance: str | None = None
    job_dir: str | None = None
    slurm_job_id: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return f"an unknown process on {self.address}"
        text = f"pid {self.pid} (uid {self.uid}): {self.cmdline[:120]}"
        if self.cookie:
            text += f" [srt job {self.job_dir or '?'} step {self.instance or '?'}]"
        return text


@dataclass(slots=True)
class PortReport:
    address: str
    port: int
    free: bool
    holders: list[Holder] = field(default_factory=list)


def _holder(pid: int | None, address: str) -> Holder:
    h = Holder(pid=pid, address=address)
    if pid is None:
        return h
    # psutil is imported where a port is busy, not with the module: every node agent
    # imports this module and most never meet a busy port (see agent/__main__.py)
    import psutil

    try:
        p = psutil.Process(pid)
        h.uid = p.uids().real
        h.cmdline = " ".join(p.cmdline())
    except psutil.Error:
        pass
    h.start_ticks = process.start_ticks(pid)
    env = process.environ_of(pid) or {}
    h.cookie = env.get(COOKIE_VAR)
    h.instance = env.get(INSTANCE_VAR)
    h.job_dir = env.get("SRT_JOB_DIR")
    h.slurm_job_id = env.get("SLURM_JOB_ID")
    return h


def check(targets: list[tuple[str, int]]) -> list[PortReport]:
    reports = []
    busy = [(a, p) for a, p in targets if not process.port_free(a, p)]
    listeners: list[Any] = []
    if busy:
        # psutil (~10 ms to import) only for a busy port: a free one, the rule, needs none
        import psutil

        try:
            listeners = [
                c for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
            ]
        except psutil.AccessDenied:  # pragma: no cover
            listeners = []
    for address, port in targets:
        if (address, port) not in busy:
            reports.append(PortReport(address, port, True))
            continue
        holders = [
            _holder(c.pid, f"{c.laddr.ip}:{port}")
            for c in listeners
            if c.laddr
            and c.laddr.port == port
            and (c.laddr.ip == address or c.laddr.ip in WILDCARDS)
        ]
        reports.append(
            PortReport(address, port, False, holders or [Holder(None, f"{address}:{port}")])
        )
    return reports


def reap(pid: int, start_ticks: int) -> bool:
    """SIGKILL ``pid`` (and its process group if it leads one) if it is still that process."""
    if process.start_ticks(pid) != start_ticks:
        return False
    try:
        import os

        if os.getpgid(pid) == pid:
            process.signal_group(pid, signal.SIGKILL)
    except OSError:
        pass
    return process.signal_pid(pid, signal.SIGKILL)


def _parse_target(text: str) -> tuple[str, int]:
    address, _, port = text.rpartition(":")
    return address.strip("[]"), int(port)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    reaped = []
    while args and args[0] == "--reap":
        pid, _, ticks = args[1].partition(":")
        reaped.append({"pid": int(pid), "killed": reap(int(pid), int(ticks))})
        args = args[2:]
    reports = check([_parse_target(a) for a in args])
    json.dump({"reaped": reaped, "ports": [asdict(r) for r in reports]}, sys.stdout)
    sys.stdout.write("\n")
    return 0


def reports_from_json(text: str) -> list[PortReport]:
    doc = json.loads(text)
    out = []
    for r in doc.get("ports", []):
        out.append(
            PortReport(r["address"], r["port"], r["free"], [Holder(**h) for h in r["holders"]])
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
