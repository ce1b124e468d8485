"""A local job's private network: a bridge, and a network namespace per virtual node.

Made with iproute2 (``ip``), which every Linux with network namespaces has, in one
``ip -batch`` per namespace rather than a netlink library: a few dozen commands once per
job do not justify a dependency. Instances enter their node's namespace through
``nsenter --net=/run/netns/<name>`` put before their argv (see :func:`enter_argv`):
``nsenter`` enters and then execs, so the PID the launcher watches is the service's own,
and its process group, cgroup and cookie are exactly as in shared mode. Python 3.11 has
no ``os.setns``; a ctypes ``setns`` in a ``preexec_fn`` would run between fork and exec of
a multi-threaded orchestrator, which Python documents as unsafe. ``ip netns exec`` also
unshares the mount namespace to remount ``/sys``, more than an instance needs.

Every object is named after the job (:attr:`LocalNetwork.tag`, from the job directory)
and recorded in the plan before it is made; removal (:func:`remove`) touches only those
names, and the bridge only when its alias names the job's directory, so what another job
or another tool made on the machine is never deleted.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Iterable

from srt_services.contracts.plan import LocalNetwork

NETNS_DIR = "/run/netns"
#: Where the subnets of namespaced jobs are taken from: a /16 of 10/8 per candidate
#: second octet, a /24 each; a job starts at the /24 its tag points to.
SUBNET_SECOND_OCTETS = range(200, 250)
#: How long one ``ip`` call may take.
IP_TIMEOUT = 20.0


class NetworkError(Exception):
    """The job's network could not be made (or removed)."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here (``None``: they can).

    The orchestrator must reach every node from the host namespace (it probes them), so
    the bridge lives in the host namespace and making it takes CAP_NET_ADMIN there; an
    unprivileged user namespace gives that only inside a namespace of its own, which the
    host side cannot reach without a user-space network stack. So: root (both
    capabilities), ``ip`` and ``nsenter``."""
    missing = [tool for tool in ("ip", "nsenter") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on PATH"
    caps = _effective_caps()
    cap_net_admin, cap_sys_admin = 12, 21
    if caps is None or not (caps >> cap_net_admin) & 1 or not (caps >> cap_sys_admin) & 1:
        return "making them needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) in this namespace"
    if not os.path.isdir("/sys/class/net"):
        return "/sys/class/net is not mounted"
    return None


def _effective_caps() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        return None
    return None


def pick_subnet(tag: str) -> str | None:
    """A private /24 that overlaps no route and no address of this machine, starting where
    the job's tag points so that two jobs starting at once rarely try the same one (the
    bridge's creation settles a race: the second job's ``ip`` fails, clearly)."""
    taken = _taken_networks()
    return None if taken is None else free_subnet(tag, taken)


def free_subnet(
    tag: str, taken: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> str | None:
    """The first /24 of the range, from the one ``tag`` points to, that overlaps none of
    ``taken`` (``None``: every one does)."""
    count = len(SUBNET_SECOND_OCTETS) * 256
    first = int(ipaddress.IPv4Address(f"10.{SUBNET_SECOND_OCTETS[0]}.0.0"))
    # each taken network as the run of candidate /24s (by index) it overlaps
    blocked = sorted(
        (max(0, (lo - first) // 256), min(count - 1, (hi - first) // 256))
        for lo, hi in (
            (int(t.network_address), int(t.broadcast_address)) for t in taken if t.version == 4
        )
        if hi >= first and lo < first + count * 256
    )
    start = int(tag, 16) % count
    for begin in (start, 0):
        index = begin
        for lo, hi in blocked:
            if hi < index:
                continue
            if lo > index:
                break
            index = hi + 1
        if index < count:
            return f"{ipaddress.IPv4Address(first + index * 256)}/24"
    return None


def _taken_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network] | None:
    out: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for args in (["-4", "route", "show", "table", "all"], ["-4", "addr", "show"]):
        try:
            text = _ip(["-j", *args])
            data = json.loads(text or "[]")
        except (NetworkError, ValueError):
            return None
        for entry in data:
            if "dst" in entry and entry["dst"] != "default":
                dst = entry["dst"]
                out.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
            for addr in entry.get("addr_info", ()):
                out.append(
                    ipaddress.ip_network(f"{addr['local']}/{addr['prefixlen']}", strict=False)
                )
    return out


def _ip(args: list[str], stdin: str | None = None) -> str:
    try:
        done = subprocess.run(
            ["ip", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"ip {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def alias_of(net: LocalNetwork) -> str:
    """What the bridge's alias says: the job that made it (checked before removal)."""
    return f"srt job {net.owner}"


def create(net: LocalNetwork) -> None:
    """Make the bridge, the namespaces and their links; on failure, remove what was made.

    A name already taken (a leftover of this job directory's killed run is removed before,
    by the take-over) is refused rather than reused: it is not provably ours."""
    for name in (net.bridge, *net.veths.values()):
        if os.path.exists(f"/sys/class/net/{name}"):
            raise NetworkError(f"a network interface named {name} already exists")
    for ns in net.namespaces.values():
        if os.path.exists(os.path.join(NETNS_DIR, ns)):
            raise NetworkError(f"a network namespace named {ns} already exists")
    subnet = ipaddress.ip_network(net.subnet)
    taken = [t for t in _taken_networks() or () if subnet.overlaps(t)]
    if taken:
        # chosen free when the job was planned; another job (or tool) took it since
        raise NetworkError(f"{net.subnet} overlaps {taken[0]}, a route of this machine now")
    prefix = subnet.prefixlen
    host = [
        f"link add {net.bridge} type bridge",
        f'link set dev {net.bridge} alias "{alias_of(net)}"',
        f"addr add {net.host_ip}/{prefix} dev {net.bridge}",
        f"link set dev {net.bridge} up",
    ]
    try:
        _ip(["-batch", "-"], "\n".join(host) + "\n")
        for node, ns in net.namespaces.items():
            veth = net.veths[node]
            _ip(["netns", "add", ns])
            _ip(
                ["-batch", "-"],
                f"link add {veth} type veth peer name eth0 netns {ns}\n"
                f"link set dev {veth} master {net.bridge} up\n",
            )
            _ip(
                ["-netns", ns, "-batch", "-"],
                f"addr add {net.addresses[node]}/{prefix} dev eth0\n"
                "link set dev eth0 up\n"
                "link set dev lo up\n",
            )
    except NetworkError:
        remove(net)
        raise


def leftovers(net: LocalNetwork | None) -> list[str]:
    """What of the job's network still exists: ``namespace X``, ``interface Y``."""
    if net is None or net.mode != "namespaces":
        return []
    found = [
        f"network namespace {ns}"
        for ns in net.namespaces.values()
        if os.path.exists(os.path.join(NETNS_DIR, ns))
    ]
    found += [
        f"interface {name}"
        for name in (*net.veths.values(), net.bridge)
        if os.path.exists(f"/sys/class/net/{name}")
    ]
    return found


def remove(net: LocalNetwork | None) -> list[str]:
    """Remove what exists of the job's network; returns what could not be removed.

    The veths go first (deleting one end deletes its peer at once, where a namespace's
    own removal frees its links only once the kernel has released it), then the
    namespaces, then the bridge, which is deleted only when its alias names this job."""
    if net is None or net.mode != "namespaces":
        return []
    problems: list[str] = []
    for veth in net.veths.values():
        if _our_link(veth, net):
            _try(["link", "del", veth], problems)
    for ns in net.namespaces.values():
        if os.path.exists(os.path.join(NETNS_DIR, ns)):
            _try(["netns", "del", ns], problems)
    if os.path.exists(f"/sys/class/net/{net.bridge}"):
        if _read(f"/sys/class/net/{net.bridge}/ifalias") == alias_of(net):
            _try(["link", "del", net.bridge], problems)
        else:
            problems.append(f"interface {net.bridge} is not this job's (its alias differs)")
    return problems


def _our_link(name: str, net: LocalNetwork) -> bool:
    """A host-side veth of the job: it exists and is on the job's bridge (or on none)."""
    base = f"/sys/class/net/{name}"
    if not os.path.exists(base):
        return False
    master = os.path.join(base, "master")
    return not os.path.exists(master) or os.path.basename(os.readlink(master)) == net.bridge


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _try(args: list[str], problems: list[str]) -> None:
    try:
        _ip(args)
    except NetworkError as exc:
        problems.append(str(exc))


def enter_argv(net: LocalNetwork, node: str, argv: Iterable[str]) -> list[str]:
    """``argv`` run inside ``node``'s namespace (see the module's docstring for why
    ``nsenter``)."""
    nsenter = shutil.which("nsenter") or "nsenter"
    return [nsenter, f"--net={os.path.join(NETNS_DIR, net.namespaces[node])}", "--", *argv]


def netns_inode(pid: int) -> str | None:
    """The network namespace a process is in (``net:[4026...]``), for tests and checks."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None
