"""The names both Mooncake kinds share: the environment Mooncake's clients read, the kind
names, and the master's address as consumers are given it.

Mooncake's Python clients (the store service, SGLang's and vLLM's connectors) all read the
same variables, so srt hands the same three to everyone who talks to the master: where its
RPC is (``MOONCAKE_MASTER``), where the transfer engine's metadata lives
(``MOONCAKE_TE_META_DATA_SERVER``) and which transport to use (``MOONCAKE_PROTOCOL``).
"""

from __future__ import annotations

import re

MASTER_KIND = "mooncake-master"
STORE_KIND = "mooncake-store"

MASTER = "MOONCAKE_MASTER"
METADATA = "MOONCAKE_TE_META_DATA_SERVER"
PROTOCOL = "MOONCAKE_PROTOCOL"
LOCAL_HOSTNAME = "MOONCAKE_LOCAL_HOSTNAME"
CONFIG_PATH = "MOONCAKE_CONFIG_PATH"
GLOBAL_SEGMENT_SIZE = "MOONCAKE_GLOBAL_SEGMENT_SIZE"
LOCAL_BUFFER_SIZE = "MOONCAKE_LOCAL_BUFFER_SIZE"
DEVICE = "MOONCAKE_DEVICE"
#: The address a transfer engine advertises for its RPC; unset, it picks the first active
#: interface's IP itself (on a Slurm node: whatever bridge or management NIC comes first).
TCP_BIND_ADDRESS = "MC_TCP_BIND_ADDRESS"

#: What Mooncake clients use when there is no HTTP metadata server: peers exchange their
#: transfer-engine metadata directly.
P2P_HANDSHAKE = "P2PHANDSHAKE"

#: ``host:port``, ``[v6]:port``: what ``external`` and ``MOONCAKE_MASTER`` hold.
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})$")


def metadata_url(host: str, port: int | None) -> str:
    """The HTTP metadata server's URL as clients want it (``host`` in URL form), or
    ``P2PHANDSHAKE`` when the master runs none."""
    return P2P_HANDSHAKE if port is None else f"http://{host}:{port}/metadata"


def split_address(address: str) -> tuple[str, int] | None:
    """``host:port`` as (host in URL form, port); ``None`` when it is not one."""
    match = _HOST_PORT.match(address.strip())
    if match is None:
        return None
    port = int(match.group("port"))
    if not 1 <= port <= 65535:
        return None
    return match.group("host"), port


def external_problem(address: str) -> str | None:
    """What is wrong with a master ``external`` address (``None``: nothing)."""
    text = address.strip()
    if "://" in text:
        return (
            f"must be the master's RPC address as host:port (what MOONCAKE_MASTER holds),"
            f" without a scheme; got {address!r}"
        )
    if split_address(text) is None:
        return f"must be host:port (port 1-65535; an IPv6 host in brackets), got {address!r}"
    return None
