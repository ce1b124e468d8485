"""What the batch host needs to know of itself before anything else is loaded: the address
the agents connect to and the environment Slurm's client commands get.

The batch script's first program (:mod:`.first`) starts the agents' step with these, and
everything it imports delays every agent's start: so they live here, on the standard
library alone, rather than in :mod:`.allocation` with the allocation's contracts (which
re-exports them)."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from collections.abc import Mapping

_IPV4 = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3})\b")


def slurm_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a Slurm client command needs from our environment (and nothing else)."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in ("PATH", "HOME", "LANG", "SLURM_CONF") if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


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


def local_address(interface: str | None = None) -> str | None:
    """This host's address as the lookup step would find it on a node (``hostname -I``,
    or the interface's): where the batch host's agents connect to."""
    argv = ["ip", "-4", "-o", "addr", "show", "dev", interface] if interface else ["hostname", "-I"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return pick_ipv4(out.stdout)
