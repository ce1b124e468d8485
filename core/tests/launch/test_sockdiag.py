"""The sock_diag listener lookup agrees with the kernel's /proc tables, and falls back to them."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from srt_services.launch import sockdiag


def _inode(sock: socket.socket) -> int:
    link = os.readlink(f"/proc/self/fd/{sock.fileno()}")
    return int(link[len("socket:[") : -1])


@pytest.fixture
def listeners() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _listen(opened: list[socket.socket], family: int, host: str, port: int = 0) -> int:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, port))
    sock.listen(1)
    opened.append(sock)
    return int(sock.getsockname()[1])


def test_finds_ipv4_and_ipv6_listeners_and_only_them(listeners: list[socket.socket]) -> None:
    port = _listen(listeners, socket.AF_INET, "127.0.0.1")
    _listen(listeners, socket.AF_INET6, "::1", port)
    other = _listen(listeners, socket.AF_INET, "127.0.0.1")
    # a connected (not listening) socket on the same port must not count
    client = socket.create_connection(("127.0.0.1", port))
    listeners.append(client)
    want = {_inode(listeners[0]), _inode(listeners[1])}
    assert sockdiag.listening_inodes(port) == want
    assert sockdiag._from_proc(port) == want
    assert sockdiag.listening_inodes(other) == {_inode(listeners[2])}


def test_a_closed_port_has_no_listener(listeners: list[socket.socket]) -> None:
    port = _listen(listeners, socket.AF_INET, "127.0.0.1")
    listeners.pop().close()
    assert sockdiag.listening_inodes(port) == set()


def test_falls_back_to_proc_when_netlink_is_refused(
    listeners: list[socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _listen(listeners, socket.AF_INET, "127.0.0.1")

    def refused(family: int) -> list[tuple[int, int]]:
        raise PermissionError("netlink blocked")

    monkeypatch.setattr(sockdiag, "_dump_listeners", refused)
    assert sockdiag.listening_inodes(port) == {_inode(listeners[0])}


def test_many_listeners_span_several_netlink_reads(listeners: list[socket.socket]) -> None:
    """Hundreds of listeners do not fit one 64 KiB read: every part of the dump counts."""
    ports = [_listen(listeners, socket.AF_INET, "127.0.0.1") for _ in range(800)]
    seen = {p for p, _ in sockdiag._dump_listeners(socket.AF_INET)}
    assert set(ports) <= seen
    assert sockdiag.listening_inodes(ports[-1]) == {_inode(listeners[-1])}
