"""A namespaced job's network for real: the bridge, a namespace per node, their removal,
the subnet choice against this machine's routes, and the 127.0.0.1 relay.

The objects are made by :func:`netns.create` from a record built as planning builds it
(``netmode.namespaced``), under a job directory of this test's own, so their names are this
test's and nothing else on the machine is touched. Traffic only crosses loopback and the
namespaces made here. Skipped where namespaces cannot be made (not root)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from srt_services.contracts.allocation import local
from srt_services.contracts.plan import LocalNetwork
from srt_services.launch import netns
from srt_services.launch.relay import Relay
from srt_services.plan import netmode

REASON = netns.unavailable()
needs_netns = pytest.mark.skipif(REASON is not None, reason=f"network namespaces: {REASON}")


def _record(tmp_path: Path, nodes: int = 2) -> LocalNetwork:
    job_dir = str(tmp_path / "job")
    subnet = netns.pick_subnet(netmode.tag(job_dir))
    assert subnet is not None
    _, net = netmode.namespaced(local(nodes), subnet, job_dir, "test")
    return net


def test_choose_takes_namespaces_only_for_a_collision_it_can_separate() -> None:
    assert netmode.choose("shared", None, ["a", "b"]) == ("shared", "requested")
    assert netmode.choose("namespaces", None, []) == ("namespaces", "requested")
    mode, why = netmode.choose("auto", None, [])
    assert mode == "shared" and "no wildcard bind collides" in why
    mode, why = netmode.choose("auto", "no ip here", ["store-a", "store-b"])
    assert mode == "shared" and "no ip here" in why
    mode, why = netmode.choose("auto", None, ["store-a", "store-b"])
    assert mode == "namespaces" and "store-a, store-b" in why


def test_the_names_carry_the_job_directory_and_fit_linux_interface_names(tmp_path: Path) -> None:
    _, net = netmode.namespaced(local(12), "10.201.7.0/24", str(tmp_path / "j"), "x")
    other = netmode.namespaced(local(12), "10.201.7.0/24", str(tmp_path / "k"), "x")[1]
    t = netmode.tag(str(tmp_path / "j"))
    assert net.bridge == f"srt-{t}" and net.host_ip == "10.201.7.1"
    assert net.addresses["node0"] == "10.201.7.2" and net.addresses["node11"] == "10.201.7.13"
    for name in (net.bridge, *net.veths.values()):
        assert len(name) <= 15 and t in name
    assert all(t in ns for ns in net.namespaces.values())
    assert not set(net.veths.values()) & set(other.veths.values())
    with pytest.raises(ValueError, match="too few addresses"):
        netmode.namespaced(local(254), "10.201.7.0/24", "/j", "x")


networks = st.builds(
    lambda a, b, c, p: ipaddress.ip_network(f"10.{a}.{b}.{c}/{p}", strict=False),
    st.integers(190, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(8, 32),
)


@settings(deadline=None)
@given(
    tag=st.text("0123456789abcdef", min_size=8, max_size=8), taken=st.lists(networks, max_size=30)
)
def test_a_chosen_subnet_overlaps_nothing_taken_and_stays_in_the_range(
    tag: str, taken: list[ipaddress.IPv4Network]
) -> None:
    chosen = netns.free_subnet(tag, taken)
    if chosen is None:  # only when every /24 of the range overlaps something taken
        spans = [(int(t.network_address), int(t.broadcast_address)) for t in taken]
        base = int(ipaddress.IPv4Address("10.200.0.0"))
        for k in range(50 * 256):
            low = base + k * 256
            assert any(a <= low + 255 and low <= b for a, b in spans), ipaddress.IPv4Address(low)
        return
    subnet = ipaddress.ip_network(chosen)
    assert subnet.prefixlen == 24 and 200 <= int(chosen.split(".")[1]) < 250
    assert not any(subnet.overlaps(t) for t in taken)
    assert netns.free_subnet(tag, taken) == chosen  # the same answer for the same tag


def test_a_range_fully_taken_gives_no_subnet() -> None:
    assert netns.free_subnet("00000000", [ipaddress.ip_network("10.0.0.0/8")]) is None
    assert netns.free_subnet("00000000", []) == "10.200.0.0/24"
    assert netns.free_subnet("00000000", [ipaddress.ip_network("10.200.0.0/23")]) == "10.200.2.0/24"


@needs_netns
def test_the_subnet_overlaps_no_route_or_address_of_this_machine(tmp_path: Path) -> None:
    subnet = ipaddress.ip_network(netns.pick_subnet(netmode.tag(str(tmp_path))) or "")
    assert subnet.prefixlen == 24 and subnet.is_private
    routes = json.loads(
        subprocess.check_output(["ip", "-j", "-4", "route", "show", "table", "all"])
    )
    for r in routes:
        if r["dst"] != "default":
            dst = r["dst"] if "/" in r["dst"] else r["dst"] + "/32"
            assert not subnet.overlaps(ipaddress.ip_network(dst, strict=False)), r


def _in_ns(ns: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nsenter", f"--net=/run/netns/{ns}", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@needs_netns
def test_two_nodes_bind_the_same_wildcard_port_and_reach_each_other(tmp_path: Path) -> None:
    net = _record(tmp_path)
    netns.create(net)
    try:
        assert not [x for x in netns.leftovers(net) if "missing" in x]
        assert len(netns.leftovers(net)) == 5  # two namespaces, two veths, the bridge
        with open(f"/sys/class/net/{net.bridge}/ifalias") as fh:
            assert fh.read().strip() == f"srt job {net.owner}"
        server = (
            "import socket,sys\n"
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', 8800)); s.listen()\n"
            "print('up', flush=True)\n"
            "c,_=s.accept(); c.sendall(sys.argv[1].encode()); c.close()\n"
        )
        procs = [
            subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{ns}", sys.executable, "-c", server, node],
                stdout=subprocess.PIPE,
                text=True,
            )
            for node, ns in net.namespaces.items()
        ]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "up"
            # both hold 0.0.0.0:8800; the host reaches node1's over the bridge...
            with socket.create_connection((net.addresses["node1"], 8800), timeout=10) as c:
                assert c.recv(100) == b"node1"
            # ...and node1 reaches node0's, namespace to namespace
            got = _in_ns(
                net.namespaces["node1"],
                "import socket\n"
                f"c=socket.create_connection(('{net.addresses['node0']}', 8800), timeout=10)\n"
                "print(c.recv(100).decode())\n",
            )
            assert got.stdout.strip() == "node0", got.stderr
            # loopback is up inside, and is the namespace's own
            lo = _in_ns(
                net.namespaces["node0"], "import socket; socket.socket().bind(('127.0.0.1', 0))"
            )
            assert lo.returncode == 0, lo.stderr
        finally:
            for p in procs:
                p.kill()
                p.wait()
    finally:
        assert netns.remove(net) == []
    assert netns.leftovers(net) == []


@needs_netns
def test_a_name_already_taken_is_refused_and_a_foreign_bridge_is_never_removed(
    tmp_path: Path,
) -> None:
    net = _record(tmp_path, nodes=1)
    # a bridge of the job's name that the job did not make (another alias)
    subprocess.run(["ip", "link", "add", net.bridge, "type", "bridge"], check=True)
    try:
        with pytest.raises(netns.NetworkError, match=f"named {net.bridge} already exists"):
            netns.create(net)
        problems = netns.remove(net)
        assert problems == [f"interface {net.bridge} is not this job's (its alias differs)"]
        assert os.path.exists(f"/sys/class/net/{net.bridge}")
    finally:
        subprocess.run(["ip", "link", "del", net.bridge], check=True)
    assert netns.leftovers(net) == []


@needs_netns
def test_a_subnet_taken_since_the_plan_is_refused(tmp_path: Path) -> None:
    """Two jobs planned at once may pick one subnet: the second to create it is refused,
    naming the overlap, rather than routing half its traffic to the other job."""
    first, second = _record(tmp_path / "a"), _record(tmp_path / "b")
    second.subnet = first.subnet
    netns.create(first)
    try:
        with pytest.raises(netns.NetworkError, match="overlaps"):
            netns.create(second)
        assert netns.leftovers(second) == []
    finally:
        netns.remove(first)
        netns.remove(second)


@needs_netns
def test_a_failed_creation_removes_what_it_made(tmp_path: Path) -> None:
    net = _record(tmp_path, nodes=2)
    # node1's namespace name taken midway: refused before anything is made
    os.makedirs(netns.NETNS_DIR, exist_ok=True)
    subprocess.run(["ip", "netns", "add", net.namespaces["node1"]], check=True)
    try:
        with pytest.raises(netns.NetworkError, match="already exists"):
            netns.create(net)
        assert netns.leftovers(net) == [f"network namespace {net.namespaces['node1']}"]
    finally:
        subprocess.run(["ip", "netns", "del", net.namespaces["node1"]], check=True)
    # node1's address refused by the kernel after the bridge and node0 were made: undone
    net.addresses["node1"] = "10.256.0.1"
    try:
        with pytest.raises(netns.NetworkError, match=r"10\.256\.0\.1"):
            netns.create(net)
        assert netns.leftovers(net) == []
    finally:
        netns.remove(net)  # whatever a failure of this test left


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_relay_copies_both_ways_and_half_closes() -> None:
    async def scenario() -> tuple[bytes, bool]:
        async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            data = await r.read()  # until the client's half close
            w.write(data.upper())
            await w.drain()
            w.close()

        target = await asyncio.start_server(echo, "127.0.0.2", 0)
        port = target.sockets[0].getsockname()[1]
        relay = Relay()
        front = _free_port()
        await relay.add(front, "127.0.0.2", port)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", front)
            w.write(b"x" * 300_000 + b"end")
            w.write_eof()
            got = await asyncio.wait_for(r.read(), 10)
            w.close()
            # a target that refuses: the client's connection is closed, not left hanging
            refused = Relay()
            dead, closed_port = _free_port(), _free_port()
            await refused.add(dead, "127.0.0.1", closed_port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", dead)
            empty = await asyncio.wait_for(r2.read(), 10) == b""
            w2.close()
            await refused.close()
        finally:
            await relay.close()
            target.close()
            await target.wait_closed()
        return got, empty

    got, empty = asyncio.run(scenario())
    assert got == b"X" * 300_000 + b"END"
    assert empty


def test_a_relay_port_in_use_is_an_error_naming_it() -> None:
    async def scenario() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            relay = Relay()
            try:
                await relay.add(taken.getsockname()[1], "127.0.0.2", 1)
            finally:
                await relay.close()

    with pytest.raises(OSError):
        asyncio.run(scenario())
