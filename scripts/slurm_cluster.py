#!/usr/bin/env python3
"""A throw-away Slurm 22.05 cluster for srt's tests, built from the Debian packages.

Everything the cluster needs (configs, munge key and socket, controller state, spool,
logs, PID files) lives in one directory, so several clusters can run side by side and
``down`` knows exactly what belongs to it.  It runs as root without systemd: the
daemons are started by hand and tracked by their PID files.

Two layouts:

* ``local``: every slurmd listens on 127.0.0.1 with its own port.  Nodes share the
  host's IP, hostname and port space.  Cheap; the default for one node.
* ``netns``: every node gets a network namespace (veth into a per-cluster bridge), its
  own IP, its own hostname (UTS namespace) and its own /etc/hosts (bind mount inside a
  private mount namespace).  Services on different nodes can then bind the same port,
  which is what a real multi-node launcher expects.  The default for more than one node.

Clusters are kept apart by a *slot*: a small integer derived from ``--name`` (moved on
if it is taken) that fixes the controller port, the slurmd ports, the subnet and the
first job id.  Distinct job id ranges matter because proctrack/cgroup puts jobs in
``/sys/fs/cgroup/<ctrl>/slurm_<node>/uid_0/job_<id>``, a path that ignores the cluster,
so two clusters with a node called ``n1`` and the same job id would share a cgroup.

Usable as a CLI (``up``/``down``/``status``/``env``) and as a module (``up()``,
``down()``, ``is_up()``) for the pytest fixtures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "ClusterError", "down", "ensure_packages", "is_up", "status", "up"]

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES: dict[str, str] = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "ip": "iproute2",
    "nsenter": "util-linux",
    "unshare": "util-linux",
}
STATE_FILE = "cluster.json"
SLOT_COUNT = 200
# Ports below the kernel's ephemeral range (32768+) so an outgoing connection never
# happens to hold one; 20 ports per slot leaves room for 19 local-mode nodes.
PORT_BASE = 17000
PORTS_PER_SLOT = 20
MAX_LOCAL_NODES = PORTS_PER_SLOT - 1
SUBNET_PREFIX = "10.213"
JOB_IDS_PER_SLOT = 100_000
DEFAULT_MIN_CPUS = 8
REGISTRY = Path("/run/srt-slurm")
GLOBAL_LOCK = Path("/run/lock/srt-slurm-cluster.lock")
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")

Log = Callable[[str], None]


class ClusterError(RuntimeError):
    """A failure with a one-line, user-facing reason (no traceback needed)."""


def _quiet(_msg: str) -> None:
    return None


# --------------------------------------------------------------------------- data


@dataclasses.dataclass(frozen=True)
class Cluster:
    """What a caller needs to drive a running cluster; built from DIR/cluster.json."""

    dir: Path
    slurm_conf: Path
    nodes: list[str]
    node_ips: dict[str, str]
    mode: str
    kill_wait: int
    name: str = ""
    ctld_port: int = 0
    first_job_id: int = 1
    proctrack: str = ""

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for Slurm clients aimed at this cluster.

        Inherited SLURM_* variables are dropped: when the caller itself runs inside a
        Slurm job (a CI runner, say), SLURM_JOB_ID and friends would make sbatch/srun
        act on that foreign job.
        """
        src = os.environ if base is None else base
        env = {k: v for k, v in src.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.slurm_conf)
        return env


@dataclasses.dataclass
class _Spec:
    """Everything `up` decided, persisted so `down` can undo it even after a crash."""

    dir: str
    name: str
    mode: str
    nodes: list[str]
    node_ips: dict[str, str]
    node_ports: dict[str, int]
    host: str
    ctld_addr: str
    ctld_port: int
    slurmd_port: int
    subnet: str
    slot: int
    first_job_id: int
    kill_wait: int
    proctrack: str
    cpus: int
    mem_mb: int
    bridge: str = ""
    netns: list[str] = dataclasses.field(default_factory=list)
    veths: list[str] = dataclasses.field(default_factory=list)
    etc_hosts: bool = False

    @property
    def path(self) -> Path:
        return Path(self.dir)

    def cluster(self) -> Cluster:
        return Cluster(
            dir=self.path,
            slurm_conf=self.path / "slurm.conf",
            nodes=list(self.nodes),
            node_ips=dict(self.node_ips),
            mode=self.mode,
            kill_wait=self.kill_wait,
            name=self.name,
            ctld_port=self.ctld_port,
            first_job_id=self.first_job_id,
            proctrack=self.proctrack,
        )


def _load_spec(d: Path) -> _Spec | None:
    try:
        raw = json.loads((d / STATE_FILE).read_text())
        return _Spec(**raw)
    except (OSError, ValueError, TypeError):
        return None


def _save_spec(spec: _Spec) -> None:
    tmp = spec.path / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(spec), indent=2) + "\n")
    tmp.replace(spec.path / STATE_FILE)


# --------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(comm, state) of a PID, or None if it does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    lpar, rpar = raw.find("("), raw.rfind(")")
    if lpar < 0 or rpar < 0:
        return None
    return raw[lpar + 1 : rpar], raw[rpar + 2 : rpar + 3]


def _gone(pid: int) -> bool:
    """Dead or a zombie: PID 1 here reaps orphans seconds late, so kill -0 lies."""
    st = _proc_stat(pid)
    return st is None or st[1] in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def _daemon_pid(pidfile: Path, binary: str, marker: str) -> int | None:
    """The PID in `pidfile` if it still runs `binary` for this cluster, else None.

    A PID file outlives its process and PIDs get reused, so the PID only counts when the
    command is the expected binary and its arguments mention this cluster's directory.
    """
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    st = _proc_stat(pid)
    if st is None or st[1] in ("Z", "X") or st[0] != binary[:15]:
        return None
    if not any(marker in arg for arg in _cmdline(pid)):
        return None
    return pid


def _protected_pids() -> set[int]:
    """This process and its ancestors: never signal the caller's own process tree."""
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
            pid = int(raw[raw.rfind(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _stop_pids(pids: Iterable[int], grace: float) -> None:
    """TERM, wait up to `grace` seconds, then KILL whatever is left."""
    todo = sorted(set(pids) - _protected_pids())
    for pid in todo:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while todo and time.monotonic() < deadline:
        todo = [p for p in todo if not _gone(p)]
        if todo:
            time.sleep(0.05)
    for pid in todo:
        if not _gone(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while todo and time.monotonic() < deadline:
        todo = [p for p in todo if not _gone(p)]
        if todo:
            time.sleep(0.05)


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


# --------------------------------------------------------------------------- helpers


def _which(binary: str) -> str | None:
    path = os.environ.get("PATH", "") + ":" + SYSTEM_PATH
    return shutil.which(binary, path=path)


def _tool(binary: str) -> str:
    found = _which(binary)
    if found is None:
        raise ClusterError(f"{binary} not found on PATH or in the sbin directories")
    return found


def _run(argv: list[str], *, env: Mapping[str, str] | None = None, timeout: float = 30) -> str:
    """Run a short command; failures become a ClusterError naming the command."""
    try:
        res = subprocess.run(
            argv,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"{' '.join(argv)}: {exc}") from None
    if res.returncode != 0:
        msg = (res.stderr.strip() or res.stdout.strip()).splitlines()
        raise ClusterError(f"{' '.join(argv)} failed: {msg[-1] if msg else res.returncode}")
    return res.stdout


def _try(argv: list[str], timeout: float = 15) -> bool:
    """Run a best-effort cleanup command; report success only."""
    try:
        return (
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _daemon_env(conf: Path) -> dict[str, str]:
    """A clean environment: daemons must not inherit pytest's or a job's variables."""
    return {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "SLURM_CONF": str(conf)}


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# logged by every daemon start on this machine and harmless; they would crowd out the cause
_LOG_NOISE = re.compile(r"pmix|PMIx|MPI: |state file|backup state")


def _tail(path: Path, n: int = 3) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"{path.name}: (no log)"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not _LOG_NOISE.search(ln)]
    if not lines:
        return f"{path.name}: (empty)"
    return f"{path.name}: " + " / ".join(lines[-n:])


def _listening_ports() -> set[int]:
    """TCP ports in LISTEN state in this network namespace (IPv4 and IPv6)."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 3 and cols[3] == "0A":
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets: list[ipaddress.IPv4Network] = []
    try:
        out = _run(["ip", "-4", "-o", "addr", "show"]) + _run(["ip", "-4", "route", "show"])
    except ClusterError:
        return nets
    for tok in re.findall(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b", out):
        with contextlib.suppress(ValueError):
            net = ipaddress.IPv4Network(tok, strict=False)
            if not net.is_loopback and net.prefixlen > 0:
                nets.append(net)
    return nets


def _subnet_busy(subnet: str) -> bool:
    mine = ipaddress.IPv4Network(f"{subnet}.0/24")
    return any(mine.overlaps(n) for n in _used_networks())


def _check_traversable(d: Path) -> None:
    """munged refuses a socket whose directory chain is not world-executable; say so early."""
    p = d
    while True:
        mode = p.stat().st_mode
        if not mode & 0o001:
            raise ClusterError(
                f"munged needs o+x on every directory above its socket, {p} is "
                f"{oct(mode & 0o777)} (chmod o+x {p}, or use a directory under /tmp)"
            )
        if p.parent == p:
            return
        p = p.parent


# --------------------------------------------------------------------------- packages


def _missing_packages() -> list[str]:
    return sorted({pkg for binary, pkg in PACKAGES.items() if _which(binary) is None})


def ensure_packages(log: Log = _quiet) -> None:
    """Install the Debian packages once; apt is serialised by the global lock."""
    if not _missing_packages():
        return
    with _flock(GLOBAL_LOCK):
        missing = _missing_packages()
        if not missing:
            return
        log(f"installing {' '.join(missing)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        lock_opt = ["-o", "DPkg::Lock::Timeout=120"]
        for argv in (
            ["apt-get", *lock_opt, "update", "-qq"],
            ["apt-get", *lock_opt, "install", "-y", "-qq", "--no-install-recommends", *missing],
        ):
            try:
                _run(argv, env=env, timeout=600)
            except ClusterError as exc:
                raise ClusterError(f"package install failed: {exc}") from None
        still = _missing_packages()
        if still:
            raise ClusterError(f"package install failed: still missing {' '.join(still)}")


# --------------------------------------------------------------------------- hardware


def _hardware() -> tuple[int, int]:
    """(CPUs, RealMemory MB) as slurmd itself measures them."""
    out = _run([_tool("slurmd"), "-C"], env={"PATH": SYSTEM_PATH})
    fields = dict(tok.split("=", 1) for tok in out.splitlines()[0].split() if "=" in tok)
    try:
        return int(fields["CPUs"]), int(fields["RealMemory"])
    except (KeyError, ValueError):
        raise ClusterError(f"cannot parse `slurmd -C`: {out.strip()}") from None


def _pick_proctrack(requested: str) -> str:
    if requested != "auto":
        return requested
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        cols = line.split()
        if len(cols) >= 4 and cols[1] == "/sys/fs/cgroup/freezer" and cols[2] == "cgroup":
            return "cgroup"
    return "linuxproc"


# --------------------------------------------------------------------------- slots


def _slot_owner_alive(slot: int) -> bool:
    try:
        owner = Path((REGISTRY / f"slot-{slot}").read_text().strip())
    except OSError:
        return False
    spec = _load_spec(owner)
    if spec is None or spec.slot != slot:
        return False
    if _daemon_pid(owner / "run" / "slurmctld.pid", "slurmctld", str(owner)) is not None:
        return True
    # a cluster in the middle of `up` has a plan but no controller yet
    try:
        return time.time() - (owner / STATE_FILE).stat().st_mtime < 120
    except OSError:
        return False


def _allocate_slot(
    *,
    name: str,
    d: Path,
    mode: str,
    nodes: int,
    ctld_port: int | None,
    slurmd_port: int | None,
    subnet: str | None,
) -> tuple[int, int, int, str]:
    """Pick (slot, ctld_port, slurmd_port, subnet); caller holds the global lock.

    Starts at a slot derived from the name so a given name usually lands on the same
    ports, and walks on past slots that another cluster or a foreign process occupies.
    """
    listening = _listening_ports()
    start = zlib.crc32(name.encode()) % SLOT_COUNT
    for k in range(SLOT_COUNT):
        slot = (start + k) % SLOT_COUNT
        claim = REGISTRY / f"slot-{slot}"
        if claim.exists():
            try:
                same = Path(claim.read_text().strip()) == d
            except OSError:
                same = False
            if not same and _slot_owner_alive(slot):
                continue
        cport = ctld_port or PORT_BASE + PORTS_PER_SLOT * slot
        dport = slurmd_port or cport + 1
        net = subnet or f"{SUBNET_PREFIX}.{slot}"
        ports = [cport] + ([dport + i for i in range(nodes)] if mode == "local" else [])
        busy_ports = [p for p in ports if p in listening]
        if busy_ports:
            if ctld_port or slurmd_port:
                raise ClusterError(
                    f"port {busy_ports[0]} is in use (another cluster or service?); "
                    "pick other --ctld-port/--slurmd-port"
                )
            continue
        if mode == "netns" and _subnet_busy(net):
            if subnet:
                raise ClusterError(f"subnet {net}.0/24 is already in use; pick another --subnet")
            continue
        REGISTRY.mkdir(parents=True, exist_ok=True)
        claim.write_text(f"{d}\n")
        return slot, cport, dport, net
    raise ClusterError("no free cluster slot (ports/subnets all taken)")


def _release_slot(spec: _Spec) -> None:
    claim = REGISTRY / f"slot-{spec.slot}"
    with contextlib.suppress(OSError):
        if Path(claim.read_text().strip()) == spec.path:
            claim.unlink()


# --------------------------------------------------------------------------- files


def _write_files(spec: _Spec) -> None:
    d = spec.path
    # controller state restarts empty, so job ids restart at FirstJobId
    for sub in ("state", "spool"):
        shutil.rmtree(d / sub, ignore_errors=True)
    for sub, mode in (
        ("munge", 0o700),
        ("run", 0o755),
        ("state", 0o700),
        ("spool", 0o755),
        ("log", 0o755),
        ("jobs", 0o755),
    ):
        (d / sub).mkdir(exist_ok=True)
        (d / sub).chmod(mode)
    d.chmod(0o755)
    for node in spec.nodes:
        # slurmd opens its domain socket here at start; it must exist beforehand
        (d / "spool" / node).mkdir(exist_ok=True)
    key = d / "munge" / "munge.key"
    if not key.exists() or key.stat().st_size < 32:
        key.unlink(missing_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(1024))

    hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    if spec.mode == "netns":
        hosts.append(f"{spec.ctld_addr} {spec.host}")
        hosts += [f"{spec.node_ips[n]} {n}" for n in spec.nodes]
    else:
        hosts.append(f"127.0.0.1 {spec.host} " + " ".join(n for n in spec.nodes if n != spec.host))
    (d / "hosts").write_text("\n".join(hosts) + "\n")

    hw = (
        f"CPUs={spec.cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={spec.cpus} "
        f"ThreadsPerCore=1 RealMemory={spec.mem_mb}"
    )
    conf = {
        "ClusterName": f"srt{spec.name}",
        "SlurmctldHost": f"{spec.host}({spec.ctld_addr})",
        "SlurmctldPort": spec.ctld_port,
        "SlurmdPort": spec.slurmd_port,
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={d}/run/munge.socket",
        "StateSaveLocation": f"{d}/state",
        "SlurmdSpoolDir": f"{d}/spool/%n",
        "SlurmctldPidFile": f"{d}/run/slurmctld.pid",
        "SlurmdPidFile": f"{d}/run/slurmd-%n.pid",
        "SlurmctldLogFile": f"{d}/log/slurmctld.log",
        "SlurmdLogFile": f"{d}/log/slurmd-%n.log",
        "SlurmctldDebug": "info",
        "SlurmdDebug": "info",
        # an empty stack keeps /etc/slurm/plugstack.conf (if any) out of our jobs
        "PlugStackConfig": f"{d}/plugstack.conf",
        "MailProg": "/bin/true",
        "ProctrackType": f"proctrack/{spec.proctrack}",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none",
        "MpiDefault": "none",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "SchedulerType": "sched/backfill",
        # the default batch_sched_delay=3 adds up to 3 s to every sbatch -> RUNNING
        "SchedulerParameters": "batch_sched_delay=0,sched_min_interval=0",
        # lets a node declare more CPUs than the VM has, so tests can run jobs side by side
        "SlurmdParameters": "config_overrides",
        "ReturnToService": 2,
        "SlurmctldTimeout": 30,
        "SlurmdTimeout": 30,
        "InactiveLimit": 0,
        "KillWait": spec.kill_wait,
        "MinJobAge": 300,
        "FirstJobId": spec.first_job_id,
    }
    lines = ["# written by scripts/slurm_cluster.py; rewritten on every fresh `up`"]
    lines += [f"{k}={v}" for k, v in conf.items()]
    for n in spec.nodes:
        if spec.mode == "local":
            lines.append(
                f"NodeName={n} NodeHostname={spec.host} NodeAddr=127.0.0.1 "
                f"Port={spec.node_ports[n]} {hw} State=UNKNOWN"
            )
        else:
            lines.append(
                f"NodeName={n} NodeHostname={n} NodeAddr={spec.node_ips[n]} {hw} State=UNKNOWN"
            )
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    (d / "slurm.conf").write_text("\n".join(lines) + "\n")
    (d / "plugstack.conf").write_text("")
    cgroup_conf = d / "cgroup.conf"
    if spec.proctrack == "cgroup":
        cgroup_conf.write_text("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n")
    else:
        cgroup_conf.unlink(missing_ok=True)
    (d / "env.sh").write_text(f"export SLURM_CONF={d}/slurm.conf\n")


# --------------------------------------------------------------------------- network


def _setup_network(spec: _Spec) -> None:
    existing_ns = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    clash = [ns for ns in spec.netns if ns in existing_ns]
    clash += [ifc for ifc in [spec.bridge, *spec.veths] if Path(f"/sys/class/net/{ifc}").exists()]
    if clash:
        raise ClusterError(
            f"{clash[0]} already exists: another cluster uses --name {spec.name}; "
            "pick another name or run `down` on that cluster's directory"
        )
    ip = _tool("ip")
    _run([ip, "link", "add", spec.bridge, "type", "bridge"])
    _run([ip, "addr", "add", f"{spec.ctld_addr}/24", "dev", spec.bridge])
    _run([ip, "link", "set", spec.bridge, "up"])
    for node, ns, veth in zip(spec.nodes, spec.netns, spec.veths, strict=True):
        _run([ip, "netns", "add", ns])
        # the peer is created straight inside the namespace under its final name
        _run([ip, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _run([ip, "-n", ns, "addr", "add", f"{spec.node_ips[node]}/24", "dev", "eth0"])
        _run([ip, "-n", ns, "link", "set", "lo", "up"])
        _run([ip, "-n", ns, "link", "set", "eth0", "up"])
        _run([ip, "link", "set", veth, "master", spec.bridge])
        _run([ip, "link", "set", veth, "up"])


def _hosts_marker(d: Path) -> tuple[str, str]:
    return f"# >>> srt slurm cluster {d}", f"# <<< srt slurm cluster {d}"


def _edit_etc_hosts(spec: _Spec, add: bool) -> None:
    """Add/remove a marked block; written in place because /etc/hosts may be a bind mount."""
    begin, end = _hosts_marker(spec.path)
    etc = Path("/etc/hosts")
    try:
        text = etc.read_text()
    except OSError:
        return
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        if line == begin:
            inside = True
        elif line == end:
            inside = False
        elif not inside:
            kept.append(line)
    if add:
        kept += [begin, *(f"{spec.node_ips[n]} {n}" for n in spec.nodes), end]
    new = "\n".join(kept) + "\n"
    if new != text:
        with etc.open("r+") as fh:
            fh.seek(0)
            fh.write(new)
            fh.truncate()


# --------------------------------------------------------------------------- daemons


def _start(argv: list[str], spec: _Spec, what: str, logname: str) -> None:
    """Start a self-daemonising binary and wait for its foreground part to exit.

    Output goes to a file, not a pipe: the daemon keeps the descriptors, and a pipe
    would make us wait for it forever.  Early errors (before the daemon opens its own
    log) land in that file.
    """
    d = spec.path
    out = d / "log" / f"{logname}.stdout"
    with out.open("ab") as fh:
        try:
            rc = subprocess.run(
                argv,
                env=_daemon_env(d / "slurm.conf"),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=30,
                check=False,
                cwd=d,
            ).returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(f"{what} did not start: {exc}") from None
    if rc != 0:
        raise ClusterError(
            f"{what} failed to start (exit {rc}): {_tail(out)}; "
            f"{_tail(d / 'log' / (logname + '.log'))}"
        )


def _start_daemons(spec: _Spec) -> None:
    d = spec.path
    conf = str(d / "slurm.conf")
    sock = d / "run" / "munge.socket"
    if _daemon_pid(d / "run" / "munged.pid", "munged", str(d)) is None:
        sock.unlink(missing_ok=True)
        Path(str(sock) + ".lock").unlink(missing_ok=True)
        _start(
            [
                _tool("munged"),
                f"--socket={sock}",
                f"--key-file={d}/munge/munge.key",
                f"--log-file={d}/log/munged.log",
                f"--pid-file={d}/run/munged.pid",
                f"--seed-file={d}/munge/munged.seed",
            ],
            spec,
            "munged",
            "munged",
        )
    _start([_tool("slurmctld"), "-i", "-f", conf], spec, "slurmctld", "slurmctld")
    slurmd = _tool("slurmd")
    for node, ns in zip(spec.nodes, spec.netns or [""] * len(spec.nodes), strict=True):
        if spec.mode == "local":
            argv = [slurmd, "-N", node, "-f", conf]
        else:
            # nsenter --net keeps our /sys mount; `ip netns exec` remounts /sys, hiding
            # /sys/fs/cgroup, and slurmd 22.05 then fails to load its cgroup plugin.
            argv = [
                _tool("nsenter"),
                f"--net=/run/netns/{ns}",
                _tool("unshare"),
                "--uts",
                "--mount",
                "--propagation",
                "slave",
                sys.executable,
                os.path.abspath(__file__),
                "_node-exec",
                str(d),
                node,
                slurmd,
            ]
        _start(argv, spec, f"slurmd {node}", f"slurmd-{node}")


def _node_exec(d: Path, node: str, slurmd: str) -> None:
    """Runs inside the node's fresh UTS + mount namespaces, then becomes slurmd."""
    socket.sethostname(node)
    subprocess.run(["mount", "--bind", str(d / "hosts"), "/etc/hosts"], check=True)
    # replacing this helper process is the point: slurmd must inherit the namespaces
    os.execve(  # noqa: S606
        slurmd, [slurmd, "-N", node, "-f", str(d / "slurm.conf")], _daemon_env(d / "slurm.conf")
    )


def _daemon_pids(spec: _Spec) -> dict[str, int | None]:
    d, marker = spec.path, str(spec.path)
    pids: dict[str, int | None] = {
        "munged": _daemon_pid(d / "run" / "munged.pid", "munged", marker),
        "slurmctld": _daemon_pid(d / "run" / "slurmctld.pid", "slurmctld", marker),
    }
    for n in spec.nodes:
        pids[f"slurmd {n}"] = _daemon_pid(d / "run" / f"slurmd-{n}.pid", "slurmd", marker)
    return pids


def _node_states(spec: _Spec) -> dict[str, str]:
    try:
        out = _run(
            [_tool("sinfo"), "-h", "-N", "-o", "%N %T"],
            env=spec.cluster().env({"PATH": SYSTEM_PATH}),
            timeout=10,
        )
    except ClusterError:
        return {}
    states: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def _wait_idle(spec: _Spec, timeout: float) -> None:
    """Wait until every node is idle, failing fast if a daemon died meanwhile."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while True:
        states = _node_states(spec)
        if all(states.get(n) == "idle" for n in spec.nodes):
            return
        dead = [k for k, v in _daemon_pids(spec).items() if v is None]
        if dead or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    logs = [spec.path / "log" / "slurmctld.log"]
    logs += [spec.path / "log" / f"slurmd-{n}.log" for n in spec.nodes]
    shown = "; ".join(_tail(p) for p in logs)
    state_txt = ", ".join(f"{n}={states.get(n, '?')}" for n in spec.nodes)
    if dead:
        raise ClusterError(f"{', '.join(dead)} died during start-up ({state_txt}); {shown}")
    raise ClusterError(f"nodes not idle after {timeout:g}s ({state_txt}); {shown}")


def _smoke_job(spec: _Spec, timeout: float) -> None:
    env = spec.cluster().env({"PATH": SYSTEM_PATH})
    n = len(spec.nodes)
    out = spec.path / "log" / "smoke.out"
    job = (
        _run(
            [
                _tool("sbatch"),
                "--parsable",
                "--job-name=smoke",
                f"--nodes={n}",
                f"--output={out}",
                "--wrap",
                f"srun --nodes={n} --ntasks={n} true",
            ],
            env=env,
        )
        .strip()
        .split(";")[0]
    )
    deadline = time.monotonic() + timeout
    state = "?"
    while time.monotonic() < deadline:
        show = _run([_tool("scontrol"), "show", "job", "-o", job], env=env, timeout=10)
        state = next((t[9:] for t in show.split() if t.startswith("JobState=")), "?")
        if state == "COMPLETED":
            return
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.05)
    raise ClusterError(
        f"smoke job {job} ended {state} (not COMPLETED) within {timeout:g}s; {_tail(out)}; "
        + _tail(spec.path / "log" / f"slurmd-{spec.nodes[0]}.log")
    )


# --------------------------------------------------------------------------- up


def _plan(
    *,
    d: Path,
    nodes: int,
    mode: str,
    name: str,
    subnet: str | None,
    ctld_port: int | None,
    slurmd_port: int | None,
    kill_wait: int,
    proctrack: str,
    cpus: int | None,
    etc_hosts: bool,
) -> _Spec:
    hw_cpus, mem = _hardware()
    slot, cport, dport, net = _allocate_slot(
        name=name,
        d=d,
        mode=mode,
        nodes=nodes,
        ctld_port=ctld_port,
        slurmd_port=slurmd_port,
        subnet=subnet,
    )
    host = socket.gethostname().split(".")[0]
    # one local node is the host itself, so `hostname` inside jobs matches the node name
    one_local = mode == "local" and nodes == 1
    names = [host] if one_local else [f"n{i}" for i in range(1, nodes + 1)]
    if mode == "netns":
        ips = {n: f"{net}.{10 + i}" for i, n in enumerate(names, start=1)}
        ports = dict.fromkeys(names, dport)
        ctld_addr = f"{net}.1"
    else:
        ips = dict.fromkeys(names, "127.0.0.1")
        ports = {n: dport + i for i, n in enumerate(names)}
        ctld_addr = "127.0.0.1"
    return _Spec(
        dir=str(d),
        name=name,
        mode=mode,
        nodes=names,
        node_ips=ips,
        node_ports=ports,
        host=host,
        ctld_addr=ctld_addr,
        ctld_port=cport,
        slurmd_port=dport,
        subnet=net if mode == "netns" else "",
        slot=slot,
        first_job_id=slot * JOB_IDS_PER_SLOT + 1,
        kill_wait=kill_wait,
        proctrack=_pick_proctrack(proctrack),
        cpus=cpus if cpus else max(hw_cpus, DEFAULT_MIN_CPUS),
        mem_mb=mem,
        bridge=f"{name}-br" if mode == "netns" else "",
        netns=[f"{name}-{n}" for n in names] if mode == "netns" else [],
        veths=[f"{name}-v{i}" for i in range(1, nodes + 1)] if mode == "netns" else [],
        etc_hosts=etc_hosts and mode == "netns",
    )


def _checked_mode(*, nodes: int, mode: str | None, name: str, subnet: str | None) -> str:
    """The mode `up` runs in, after refusing arguments it cannot honour (and non-root)."""
    if os.geteuid() != 0:
        raise ClusterError("must run as root (slurmd, namespaces and cgroups need it)")
    mode = mode or ("local" if nodes == 1 else "netns")
    if mode not in ("local", "netns"):
        raise ClusterError(f"mode must be local or netns, not {mode!r}")
    if not NAME_RE.match(name):
        raise ClusterError(
            f"name {name!r}: 1-8 chars, lowercase letters/digits, starting with a letter "
            "(it prefixes interface names, which are limited to 15 chars)"
        )
    if nodes < 1 or (mode == "local" and nodes > MAX_LOCAL_NODES) or nodes > 200:
        raise ClusterError(f"nodes must be 1..{MAX_LOCAL_NODES if mode == 'local' else 200}")
    if subnet is not None and not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", subnet):
        raise ClusterError(f"subnet {subnet!r}: give the first three octets, e.g. 10.251.0")
    return mode


def _create(spec: _Spec) -> None:
    """Create what the plan describes (under GLOBAL_LOCK): files, network, daemons."""
    # persisted before anything is created, so `down` can undo a partial `up`
    _save_spec(spec)
    _write_files(spec)
    if spec.mode == "netns":
        _setup_network(spec)
    if spec.etc_hosts:
        _edit_etc_hosts(spec, add=True)
    _start_daemons(spec)


def up(
    dir: str | os.PathLike[str],
    *,
    nodes: int = 1,
    mode: str | None = None,
    name: str = "srt",
    subnet: str | None = None,
    ctld_port: int | None = None,
    slurmd_port: int | None = None,
    kill_wait: int = 5,
    timeout: float = 60,
    proctrack: str = "auto",
    cpus: int | None = None,
    etc_hosts: bool = False,
    smoke: bool = False,
    log: Log = _quiet,
) -> Cluster:
    """Bring the cluster in `dir` up (or re-check it if it already runs) and describe it.

    With `smoke`, a fresh cluster also runs one job across all nodes before returning.
    That proves munge credentials, step launch and node addressing work, and it absorbs
    slurmctld's first scheduling pass, which comes ~3 s after it starts: without it the
    first job of a test would wait those 3 s.

    On failure everything started so far is torn down again (logs stay in `dir`) and a
    ClusterError with a one-line reason is raised.
    """
    mode = _checked_mode(nodes=nodes, mode=mode, name=name, subnet=subnet)
    ensure_packages(log)

    d = Path(dir).absolute()
    d.mkdir(parents=True, exist_ok=True)
    # DIR is ours alone; a restrictive umask must not hide the munge socket from clients
    d.chmod(d.stat().st_mode | 0o711)
    _check_traversable(d)
    with _flock(d / ".lock"):
        old = _load_spec(d)
        if old is not None and all(_daemon_pids(old).values()):
            if len(old.nodes) != nodes or old.mode != mode:
                raise ClusterError(
                    f"{d} already runs {len(old.nodes)} node(s) in {old.mode} mode; "
                    "run `down` first to change it"
                )
            _wait_idle(old, timeout)
            log(f"already up: {d}")
            return old.cluster()
        if old is not None or (d / "run").exists():
            down(d, log=log)

        spec: _Spec | None = None
        try:
            with _flock(GLOBAL_LOCK):
                spec = _plan(
                    d=d,
                    nodes=nodes,
                    mode=mode,
                    name=name,
                    subnet=subnet,
                    ctld_port=ctld_port,
                    slurmd_port=slurmd_port,
                    kill_wait=kill_wait,
                    proctrack=proctrack,
                    cpus=cpus,
                    etc_hosts=etc_hosts,
                )
                _create(spec)
            _wait_idle(spec, timeout)
            if smoke:
                _smoke_job(spec, timeout)
        except BaseException:
            if spec is not None or _load_spec(d) is not None:
                down(d)
            raise
    log(
        f"up: {len(spec.nodes)} node(s) {', '.join(spec.nodes)}, mode={spec.mode}, "
        f"proctrack={spec.proctrack}, slurmctld {spec.ctld_addr}:{spec.ctld_port}, "
        f"first job id {spec.first_job_id}, dir={d}"
    )
    return spec.cluster()


# --------------------------------------------------------------------------- down


def _dev_ino(path: str) -> tuple[int, int] | None:
    """What identifies a namespace file (None once it is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _leftover_pids(spec: _Spec) -> set[int]:
    """Processes that belong to this cluster, found by what they hold, never by name.

    * anything in one of our network namespaces (node daemons, steps, their children);
    * slurmstepd with a file under our directory open (local mode has no namespace);
    * job processes: SLURM_JOB_ID set and SLURM_CONF pointing at our slurm.conf (this
      also finds setsid'd daemons of a job under proctrack/linuxproc);
    * members of our jobs' cgroups (our job id range; the cgroup path ignores the cluster).
    """
    d = str(spec.path)
    ns_ids = {i for i in (_dev_ino(f"/run/netns/{ns}") for ns in spec.netns) if i is not None}
    found: set[int] = set()
    for pid in _all_pids():
        if ns_ids:
            ns = _dev_ino(f"/proc/{pid}/ns/net")
            if ns is None:
                continue  # gone
            if ns in ns_ids:
                found.add(pid)
                continue
        if _holds_our_files(pid, d):
            found.add(pid)
    return found | _our_cgroup_members(spec)


def _holds_our_files(pid: int, d: str) -> bool:
    """A live slurmstepd with a file under our directory `d` open, or a process of one of
    our jobs (SLURM_JOB_ID set and SLURM_CONF pointing at our slurm.conf)."""
    stat = _proc_stat(pid)
    if stat is None or stat[1] == "Z":
        return False
    if stat[0] == "slurmstepd":
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(d + "/"):
                        return True
        return False
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    conf_env = f"SLURM_CONF={d}/slurm.conf".encode()
    return conf_env in env and any(e.startswith(b"SLURM_JOB_ID=") for e in env)


def _our_cgroup_members(spec: _Spec) -> set[int]:
    """The processes in our jobs' cgroups, thawed first: a frozen task cannot act on SIGKILL."""
    found: set[int] = set()
    for job_dir in _our_job_cgroups(spec):
        with contextlib.suppress(OSError):
            freezer_state = job_dir / "freezer.state"
            if freezer_state.exists():
                freezer_state.write_text("THAWED\n")
        for procs in job_dir.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in procs.read_text().split())
    return found


def _our_job_cgroups(spec: _Spec) -> list[Path]:
    lo, hi = spec.first_job_id, spec.first_job_id + JOB_IDS_PER_SLOT
    out: list[Path] = []
    root = Path("/sys/fs/cgroup")
    for node in spec.nodes:
        for ctl in root.glob(f"*/slurm_{node}"):
            for job in ctl.glob("uid_*/job_*"):
                with contextlib.suppress(ValueError):
                    if lo <= int(job.name[4:]) < hi:
                        out.append(job)
    return out


def _remove_cgroups(spec: _Spec) -> None:
    """rmdir (never rm -r) our job cgroups, then the shared parents if they became empty."""
    parents: set[Path] = set()
    for job in _our_job_cgroups(spec):
        parents.add(job.parent)
        for sub in sorted((p for p in job.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            job.rmdir()
    for node in spec.nodes:
        for ctl in Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"):
            parents.update(ctl.glob("uid_*"))
            parents.add(ctl)
    for p in sorted(parents, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            p.rmdir()  # fails (fine) while another cluster's node of the same name uses it


def _cancel_jobs(spec: _Spec, log: Log) -> None:
    env = spec.cluster().env({"PATH": SYSTEM_PATH})
    try:
        jobs = _run([_tool("squeue"), "-h", "-o", "%i"], env=env, timeout=10).split()
    except ClusterError:
        return
    if not jobs:
        return
    log(f"cancelling jobs {' '.join(jobs)}")
    with contextlib.suppress(ClusterError):
        _run([_tool("scancel"), *jobs], env=env, timeout=10)
    # a step that ignores TERM gets KILL only after KillWait
    deadline = time.monotonic() + spec.kill_wait + 10
    while time.monotonic() < deadline:
        try:
            left = _run([_tool("squeue"), "-h", "-o", "%i"], env=env, timeout=10).split()
        except ClusterError:
            return
        if not left:
            return
        time.sleep(0.2)


def down(dir: str | os.PathLike[str], log: Log = _quiet) -> None:
    """Stop everything the cluster in `dir` started; keeps the files (logs) in `dir`.

    Works on a half-started cluster and is a no-op the second time.  Only PIDs that can
    be tied to this cluster are signalled.
    """
    d = Path(dir).absolute()
    if not d.is_dir():
        return
    spec = _load_spec(d)
    if spec is None:
        # no plan was ever written: at most munged/slurmctld were started by hand
        for pidfile, binary in (("slurmctld.pid", "slurmctld"), ("munged.pid", "munged")):
            pid = _daemon_pid(d / "run" / pidfile, binary, str(d))
            if pid is not None:
                _stop_pids([pid], 10)
        return
    _stop_processes(spec, log)
    _remove_network(spec)
    if spec.etc_hosts:
        _edit_etc_hosts(spec, add=False)
    _remove_cgroups(spec)
    for f in (d / "run").glob("*.pid"):
        f.unlink(missing_ok=True)
    (d / "run" / "munge.socket").unlink(missing_ok=True)
    with _flock(GLOBAL_LOCK):
        _release_slot(spec)
    (d / STATE_FILE).unlink(missing_ok=True)
    # keep a copy of the plan for post-mortems; `up` only looks at STATE_FILE
    with contextlib.suppress(OSError):
        (d / "cluster.last.json").write_text(json.dumps(dataclasses.asdict(spec), indent=2))
    log(f"down: {d}")


def _stop_processes(spec: _Spec, log: Log) -> None:
    """Jobs first (while slurmctld and munged can still cancel them), then the node
    daemons, slurmctld, whatever of the cluster is left, and munged last."""
    pids = _daemon_pids(spec)
    if pids["slurmctld"] is not None and pids["munged"] is not None:
        _cancel_jobs(spec, log)
    _stop_pids([p for k, p in pids.items() if k.startswith("slurmd") and p], 10)
    if pids["slurmctld"]:
        _stop_pids([pids["slurmctld"]], 10)
    leftovers = _leftover_pids(spec)
    if leftovers:
        log(f"killing leftover pids {' '.join(map(str, sorted(leftovers)))}")
        _stop_pids(leftovers, 3)
    if pids["munged"]:
        _stop_pids([pids["munged"]], 10)


def _remove_network(spec: _Spec) -> None:
    """Delete our namespaces, and the veths and bridge a half-done `up` may have left."""
    ip = _which("ip")
    if not ip:
        return
    for ns in spec.netns:
        if Path(f"/run/netns/{ns}").exists():
            _try([ip, "netns", "del", ns])
    # veths vanish with their namespace; these catch a veth left by a half-done up
    for ifc in [*spec.veths, spec.bridge]:
        if ifc and Path(f"/sys/class/net/{ifc}").exists():
            _try([ip, "link", "del", ifc])


# --------------------------------------------------------------------------- status


def is_up(dir: str | os.PathLike[str]) -> bool:
    """True when the plan exists and every daemon of it is running."""
    spec = _load_spec(Path(dir).absolute())
    return spec is not None and all(_daemon_pids(spec).values())


def status(dir: str | os.PathLike[str]) -> dict[str, Any]:
    d = Path(dir).absolute()
    spec = _load_spec(d)
    if spec is None:
        return {"dir": str(d), "up": False, "daemons": {}, "nodes": {}}
    pids = _daemon_pids(spec)
    alive = all(pids.values())
    return {
        "dir": str(d),
        "up": alive,
        "mode": spec.mode,
        "daemons": pids,
        "nodes": _node_states(spec) if pids["slurmctld"] else {},
        "node_ips": spec.node_ips,
        "slurm_conf": str(d / "slurm.conf"),
        "ctld": f"{spec.ctld_addr}:{spec.ctld_port}",
        "first_job_id": spec.first_job_id,
    }


# --------------------------------------------------------------------------- CLI


def _main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["_node-exec"]:
        _node_exec(Path(args_in[1]), args_in[2], args_in[3])
        return 1  # not reached: exec

    ap = argparse.ArgumentParser(prog="slurm_cluster.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start (or re-check) the cluster in DIR")
    p_up.add_argument("dir")
    p_up.add_argument("--nodes", type=int, default=1)
    p_up.add_argument(
        "--mode",
        choices=["local", "netns"],
        default=None,
        help="default: local for 1 node, netns for more",
    )
    p_up.add_argument("--name", default="srt", help="prefix for netns/bridge/veth names (<= 8)")
    p_up.add_argument("--subnet", default=None, help="first three octets, e.g. 10.251.0")
    p_up.add_argument("--ctld-port", type=int, default=None)
    p_up.add_argument(
        "--slurmd-port", type=int, default=None, help="local mode: node i uses PORT+i-1"
    )
    p_up.add_argument("--kill-wait", type=int, default=5)
    p_up.add_argument("--timeout", type=float, default=60)
    p_up.add_argument(
        "--proctrack", choices=["auto", "cgroup", "linuxproc", "pgid"], default="auto"
    )
    p_up.add_argument(
        "--cpus",
        type=int,
        default=None,
        help=f"CPUs per node (default: max(hardware, {DEFAULT_MIN_CPUS}))",
    )
    p_up.add_argument(
        "--etc-hosts",
        action="store_true",
        help="netns mode: also list the nodes in the host's /etc/hosts",
    )
    p_up.add_argument(
        "--smoke",
        action="store_true",
        help="run one job on all nodes before returning (takes ~3 s on a fresh cluster)",
    )
    for cmd, text in (
        ("down", "stop the cluster in DIR"),
        ("status", "show the cluster state"),
        ("env", "print export SLURM_CONF=..."),
    ):
        sub.add_parser(cmd, help=text).add_argument("dir")
    args = ap.parse_args(args_in)

    def log(msg: str) -> None:
        print(f"[slurm_cluster] {msg}", file=sys.stderr)

    try:
        if args.cmd == "up":
            t0 = time.monotonic()
            c = up(
                args.dir,
                nodes=args.nodes,
                mode=args.mode,
                name=args.name,
                subnet=args.subnet,
                ctld_port=args.ctld_port,
                slurmd_port=args.slurmd_port,
                kill_wait=args.kill_wait,
                timeout=args.timeout,
                proctrack=args.proctrack,
                cpus=args.cpus,
                etc_hosts=args.etc_hosts,
                smoke=args.smoke,
                log=log,
            )
            log(
                f"ready in {time.monotonic() - t0:.2f}s; nodes: "
                + ", ".join(f"{n}={c.node_ips[n]}" for n in c.nodes)
            )
            print(f"export SLURM_CONF={c.slurm_conf}")
        elif args.cmd == "down":
            down(args.dir, log=log)
        elif args.cmd == "status":
            st = status(args.dir)
            print(json.dumps(st, indent=2))
            return 0 if st["up"] else 3
        elif args.cmd == "env":
            print(f"export SLURM_CONF={Path(args.dir).absolute() / 'slurm.conf'}")
    except ClusterError as exc:
        print(f"slurm_cluster: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
