"""What a kind, placement or probe sees about the job while the plan is being built."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the allocation: its name, the address services bind, its position."""

    name: str
    ip: str
    index: int


@dataclass(frozen=True, slots=True)
class Worker:
    """One engine worker; a worker wider than a node has one entry per node in ``nodes``."""

    role: str
    index: int
    nodes: tuple[Node, ...]
    gpus: tuple[int, ...]
    slot: int
    port: int | None
    gpus_per_node: int

    @property
    def key(self) -> str:
        return f"{self.role}_{self.index}"

    @property
    def whole_node(self) -> bool:
        return len(self.gpus) >= self.gpus_per_node


@dataclass(frozen=True, slots=True)
class Layout:
    """The allocation carved into the job's node roles (see ``srt_services.plan.layout``)."""

    nodes: tuple[Node, ...]
    head: Node
    infra: Node
    client: Node
    dedicated_infra: bool
    dedicated_client: bool
    worker_nodes: tuple[Node, ...]
    role_nodes: Mapping[str, tuple[Node, ...]]
    workers: tuple[Worker, ...]
    pools: Mapping[str, tuple[Node, ...]]
    gpus_per_node: int

    @property
    def compute(self) -> tuple[Node, ...]:
        """Engine worker nodes, then every pool's nodes, each once, in allocation order."""
        seen: dict[str, Node] = {n.name: n for n in self.worker_nodes}
        for pool in self.pools.values():
            for n in pool:
                seen.setdefault(n.name, n)
        return tuple(sorted(seen.values(), key=lambda n: n.index))

    @property
    def all(self) -> tuple[Node, ...]:
        """Head, infra and client nodes, then compute: every node the job uses, once."""
        out: dict[str, Node] = {}
        for n in (self.head, self.infra, self.client, *self.compute):
            out.setdefault(n.name, n)
        return tuple(out.values())


@dataclass(frozen=True, slots=True)
class JobPaths:
    """Where the job keeps its files; symbolic (``<job_dir>``) in a dry run."""

    job_dir: str
    job_id: str
    #: Root of node-local storage on every node (the site config's ``storage.node_local``).
    local_root: str = "/tmp"

    @property
    def log_dir(self) -> str:
        return f"{self.job_dir}/logs"

    def work_dir(self, step: str) -> str:
        return f"{self.job_dir}/work/{step}"

    @property
    def metrics_dir(self) -> str:
        """The job's metrics record: the scrape targets srt keeps, a scraper's database."""
        return f"{self.job_dir}/metrics"

    @property
    def scrape_targets_file(self) -> str:
        """Prometheus ``file_sd`` list of the targets whose process runs now, rewritten by
        srt (atomically) whenever an instance starts, restarts or stops."""
        return f"{self.metrics_dir}/targets.json"

    @property
    def tsdb_dir(self) -> str:
        """Where the job's Prometheus keeps its samples (part of the job's record)."""
        return f"{self.metrics_dir}/tsdb"

    @property
    def local_job_dir(self) -> str:
        """This job's node-local directory on every node (removed when the job ends).

        A Slurm job's id is unique on its cluster: ``srt-<job id>``. A local job's id is its
        directory's name (``job``, ``run1``...), which other jobs on the same machine may
        share, so it is named by a digest of the job directory instead: one job never
        writes into, or at its end removes, another one's node-local files. The name stays
        short on purpose: some servers put Unix socket paths under it (Ray allows about 36
        bytes for its temp dir). A symbolic dry run (``<job_dir>``) keeps the plain name.
        """
        if self.job_id.isdigit() or not self.job_dir.startswith("/"):
            return f"{self.local_root}/srt-{self.job_id}"
        digest = hashlib.sha1(self.job_dir.encode(), usedforsecurity=False).hexdigest()[:10]
        return f"{self.local_root}/srt-{digest}"

    def local_dir(self, step: str) -> str:
        """An instance's node-local scratch (``{local_dir}``): for state that must not sit
        on the shared job directory (a WAL, a Ray session) and dies with the job."""
        return f"{self.local_job_dir}/{step}"


class PathOutsideJob(ValueError):
    """A relative path that leaves the job directory (``../x``): refused, because a path
    outside the job directory must be written absolute, where a reader sees it is."""


@dataclass(slots=True)
class InstanceContext:
    """One instance being planned: where it runs and the placeholder values it renders.

    Not frozen: one is built per instance of a 10,000-service plan, and a frozen dataclass
    pays ``object.__setattr__`` for each field. Treat it as read-only.
    """

    service: str
    step: str
    node: Node
    index: int
    role: str
    nodes: tuple[Node, ...]
    layout: Layout
    paths: JobPaths
    worker: Worker | None = None
    worker_node_rank: int = 0
    values: Mapping[str, str] = field(default_factory=dict)
    #: What the job's discovery services announce (``ETCD_ENDPOINTS``, ``MOONCAKE_MASTER``...,
    #: external addresses included), whether or not this instance inherits it: for a kind
    #: that must point its own process or config file at another service (a Mooncake
    #: store at its master) without re-deriving where that service runs.
    discovery_env: Mapping[str, str] = field(default_factory=dict)
    #: The site's ``[binaries]`` table: a server's command name -> the path it runs as on
    #: this site (see :func:`~srt_services.contracts.servers.server_binary`).
    binaries: Mapping[str, str] = field(default_factory=dict)
    #: The image this instance runs in, as the recipe or its kind names it (a site alias is
    #: not resolved); ``None`` on the bare node, and where the launcher runs no images (a
    #: local run): a kind whose command depends on the image (an upstream exporter image
    #: has its binary elsewhere than a host package) reads it here.
    container: str | None = None

    @property
    def work_dir(self) -> str:
        return self.paths.work_dir(self.step)

    @property
    def local_dir(self) -> str:
        return self.paths.local_dir(self.step)

    def job_path(self, written: str) -> str:
        """A path the recipe wrote, as the instance's probe (or kind) must use it.

        Placeholders are rendered first, so ``{job_dir}/ready`` and ``{local_dir}/x`` are
        absolute (never glued under the job directory a second time). A path that is still
        relative is the job directory's and must stay inside it: ``../x`` raises
        :class:`PathOutsideJob`. An absolute path (written, or rendered from a placeholder
        that names a directory) is taken as the recipe wrote it.
        """
        from srt_services.recipe.placeholders import render

        path = render(written, self.values) if "{" in written else written
        root = self.paths.job_dir
        # in a dry run the job directory is the symbolic ``<job_dir>``, absolute all the same
        if path.startswith(("/", root + "/")) or path == root:
            return path
        inside = posixpath.normpath(path)
        if inside == ".." or inside.startswith("../"):
            raise PathOutsideJob(
                f"{path!r} is relative to the job directory but leads out of it; write an"
                " absolute path (or start it with {job_dir}, {log_dir}...) to use a file"
                " outside the job directory"
            )
        return f"{root}/{inside}" if inside != "." else root
