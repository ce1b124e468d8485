"""The expansion interface: a ``placement.per`` value to the instances of a service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from srt_services.contracts.context import Layout, Node, Worker


@dataclass(slots=True)
class InstanceSeed:
    """Where one instance goes, before commands and env are rendered.

    Not frozen (one is built per instance, and a frozen dataclass pays
    ``object.__setattr__`` for each field); treat it as read-only.
    """

    node: Node
    step: str
    worker: Worker | None = None
    worker_node_rank: int = 0


class Expansion:
    """Base class of instance expansions. Subclass it and set ``name``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: Needs a placement that selects workers (``Placement.worker_roles``).
    needs_workers: ClassVar[bool] = False

    def seeds(
        self,
        service: str,
        nodes: tuple[Node, ...],
        layout: Layout,
        worker_roles: frozenset[str] | None,
    ) -> list[InstanceSeed]:
        """Instances on ``nodes``, in launch order, with their step names."""
        raise NotImplementedError
