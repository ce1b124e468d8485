"""Checks for jobs whose virtual nodes are network namespaces (``--local-network``).

A plugin's test that runs servers on separate local nodes needs to know whether this
machine can make namespaces at all (else it skips, saying why), what the job made (its
plan's record: bridge, namespaces, node addresses, relayed ports), what of that is still
there, and which namespace a process is in. The survivor check
(:func:`srt_services.testing.survivors.assert_no_survivors`) already fails a job whose
namespaces or bridge outlived it.
"""

from __future__ import annotations

from srt_services.contracts.plan import LocalNetwork
from srt_services.launch.netns import leftovers, netns_inode, unavailable
from srt_services.testing.survivors import network_of

__all__ = ["LocalNetwork", "leftovers", "netns_inode", "network_of", "unavailable"]
