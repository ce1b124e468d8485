"""The placement interface: a ``placement.node`` value to the nodes it selects."""

from __future__ import annotations

from typing import ClassVar

from srt_services.contracts.context import Layout, Node


class Placement:
    """Base class of placement resolvers. Subclass it and set ``name``."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: Always exactly one node (``source`` builds are allowed only on these in Slurm).
    single_node: ClassVar[bool] = False
    #: For ``per: worker``: which roles' workers the placement attaches to; ``None`` means
    #: the placement does not select workers and ``per: worker`` is refused on it.
    worker_roles: ClassVar[frozenset[str] | None] = None
    #: Taking this placement reserves a node of its own for the infra services.
    reserves_infra_node: ClassVar[bool] = False

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        """Nodes selected, in allocation order, each once."""
        raise NotImplementedError
