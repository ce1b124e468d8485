"""Listening TCP sockets of this network namespace, asked of the kernel over sock_diag.

The tcp and http probes check that the process answering on a port belongs to the
instance, which needs the inode of every socket listening on that port. Reading
``/proc/net/tcp`` for that walks the kernel's whole connection hash, however few sockets
exist: about 10 ms here, paid on the path between "the port opened" and "ready". A
sock_diag dump restricted to the LISTEN state walks only the listening table and answers
in well under a millisecond. Where netlink is unavailable (a seccomp profile, an old
kernel), :func:`listening_inodes` falls back to the ``/proc`` tables.
"""

from __future__ import annotations

import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
TCP_LISTEN = 10

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_REQUEST = struct.Struct("=BBBBI48x")  # inet_diag_req_v2 with an empty inet_diag_sockid
_SPORT = struct.Struct(">H")  # inet_diag_msg.id.idiag_sport, network order, at offset 4
_INODE = struct.Struct("=I")  # inet_diag_msg.idiag_inode, at offset 68
_SPORT_AT = 4
_INODE_AT = 68


def _dump_listeners(family: int) -> list[tuple[int, int]]:
    """``(port, inode)`` of every TCP socket of ``family`` in the LISTEN state."""
    sock = socket.socket(
        socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG
    )
    try:
        body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN)
        header = _HEADER.pack(
            _HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
        )
        sock.sendto(header + body, (0, 0))
        found: list[tuple[int, int]] = []
        while True:
            data = sock.recv(65536)
            if not data:
                raise OSError("sock_diag: empty answer")
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data, offset)
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    raise OSError("sock_diag: the kernel refused the request")
                if length < _HEADER.size:
                    raise OSError("sock_diag: malformed message")
                start = offset + _HEADER.size
                if start + _INODE_AT + _INODE.size <= offset + length:
                    (port,) = _SPORT.unpack_from(data, start + _SPORT_AT)
                    (inode,) = _INODE.unpack_from(data, start + _INODE_AT)
                    found.append((port, inode))
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _from_proc(port: int, pid: int | None = None) -> set[int]:
    found: set[int] = set()
    want = f":{port:04X}"
    root = "/proc/net" if pid is None else f"/proc/{pid}/net"
    for table in (f"{root}/tcp", f"{root}/tcp6"):
        try:
            with open(table) as fh:
                next(fh, None)
                for line in fh:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "0A" and fields[1].endswith(want):
                        found.add(int(fields[9]))
        except OSError:
            continue
    return found


def listening_inodes(port: int, netns_of: int | None = None) -> set[int]:
    """Inodes of the TCP sockets listening on ``port`` (IPv4 and IPv6) in our namespace,
    or in the network namespace of process ``netns_of`` (a namespaced virtual node: its
    ``/proc/PID/net`` tables, since our netlink socket sees only our namespace)."""
    if netns_of is not None:
        return _from_proc(port, netns_of)
    try:
        pairs = _dump_listeners(socket.AF_INET) + _dump_listeners(socket.AF_INET6)
    except OSError:
        return _from_proc(port)
    return {inode for p, inode in pairs if p == port}
