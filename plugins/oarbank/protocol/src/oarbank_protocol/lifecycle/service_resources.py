"""One service's share of the node's resources: its host-memory reservation and the pool
tokens it provides.

A ``reserves_host_memory`` service is charged its ``fingerprint.reserve.mem_gb`` while it
runs: booked before it starts (the admission that starts it checked the room), released
when it stops or crashes. The pool tokens its fingerprint reports are the node's capacity
for those pools while the service is available, and none while it is not; pools the
manifest does not declare for it are ignored.
"""

from __future__ import annotations

from oarbank_protocol.documents import Fingerprint
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.manifest import ServiceSpec


class ServiceResources:
    """The node's books as one service sees them."""

    def __init__(self, spec: ServiceSpec, resources: NodeResources) -> None:
        self.spec = spec
        self.resources = resources
        #: the service's name in the memory ledger
        self.holder = f"service:{spec.name}"

    def charged(self) -> float:
        return self.resources.charged(self.holder)

    def needed_gb(self, fingerprint: Fingerprint | None) -> float:
        """Memory this service would add to the node's charges if it started now."""
        if not self.spec.reserves_host_memory or fingerprint is None:
            return 0.0
        if self.charged() > 0:
            return 0.0
        return fingerprint.reserve.mem_gb

    def precharge(self, fingerprint: Fingerprint | None) -> None:
        """Book the reservation before the service starts (admission already checked it)."""
        if self.spec.reserves_host_memory and fingerprint is not None:
            self.resources.charge(self.holder, fingerprint.reserve.mem_gb)

    def discharge(self) -> None:
        self.resources.discharge(self.holder)

    def publish_capacity(self, fingerprint: Fingerprint | None, *, available: bool) -> None:
        """Offer the declared pools' tokens while ``available``; withdraw them otherwise."""
        if available and fingerprint is not None:
            declared = set(self.spec.pools)
            self.resources.set_capacity(
                self.spec.name, {k: v for k, v in fingerprint.pools.items() if k in declared}
            )
        else:
            self.resources.clear_capacity(self.spec.name)
