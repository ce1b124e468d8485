"""Placeholder values: the job's, each instance's, and rendering recipe strings with them.

A 10,000-service plan has tens of thousands of instances and most render nothing, so the
values are built once per job (``common``), once per service (a pool's node set) and, per
instance, only when something will read them (:class:`LazyValues`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from srt_services.contracts.kind import KIND_PLACEHOLDERS
from srt_services.recipe.models import ROLE_NAMES
from srt_services.recipe.placeholders import render

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.checking.settled import Settled
    from srt_services.contracts.context import JobPaths, Layout, Node, Worker
    from srt_services.plan.context import PlanContext

MASTER_PORT = "8700"
METADATA_PORT = "8701"


def job_values(
    loaded: LoadedRecipe, lay: Layout, paths: JobPaths, recipe_dir: str
) -> dict[str, str]:
    """The values every instance of the job shares."""
    recipe = loaded.recipe
    return {
        "head_node": lay.head.name,
        "head_ip": lay.head.ip,
        "infra_node": lay.infra.name,
        "infra_ip": lay.infra.ip,
        "master_port": MASTER_PORT,
        "metadata_port": METADATA_PORT,
        "gpus_per_node": str(recipe.resources.gpus_per_node),
        "job_dir": paths.job_dir,
        "log_dir": paths.log_dir,
        "local_job_dir": paths.local_job_dir,
        "job_id": paths.job_id,
        "job_name": recipe.name,
        "frontend_port": str(recipe.frontend.port) if recipe.frontend else "",
        "recipe_dir": recipe_dir,
        # srt run from a venv that was never activated: PATH's python3 may not be the one
        # that has the job's packages; this one has (it is running srt)
        "python": sys.executable,
        **_role_values(lay),
    }


def kind_placeholders(services: Iterable[Settled]) -> dict[str, str]:
    """The job placeholders the services decide (the Mooncake master's ports), so
    ``{master_port}`` follows a master whose ``rpc_port`` the recipe moved."""
    out: dict[str, str] = {}
    for s in services:
        if s.options is None:
            continue
        given = s.kind.job_placeholders(s.spec, s.options)
        out.update({k: v for k, v in given.items() if k in KIND_PLACEHOLDERS})
    return out


def _role_values(lay: Layout) -> dict[str, str]:
    """``{<role>_nodes}``, ``{<role>_ips}`` and ``{<role>_endpoints}`` (ip:port of each
    worker, for roles with a ``port``) for every role, empty for roles the recipe lacks."""
    out: dict[str, str] = {}
    for role in ROLE_NAMES:
        nodes = lay.role_nodes.get(role, ())
        out[f"{role}_nodes"] = ",".join(n.name for n in nodes)
        out[f"{role}_ips"] = ",".join(n.ip for n in nodes)
        out[f"{role}_endpoints"] = ",".join(
            f"{w.nodes[0].ip}:{w.port}"
            for w in lay.workers
            if w.role == role and w.port is not None
        )
    return out


class OwnNodes:
    """The ``{pool_*}`` values of a service's node set, joined on first use and once per
    service, not per instance (a pool of N nodes would otherwise cost N joins of N names;
    most services never name them at all)."""

    __slots__ = ("_data", "nodes")

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self._data: dict[str, str] | None = None

    def get(self) -> dict[str, str]:
        if self._data is None:
            own = self.nodes
            self._data = (
                {
                    "pool_node": own[0].name,
                    "pool_ip": own[0].ip,
                    "pool_nodes": ",".join([n.name for n in own]),
                    "pool_ips": ",".join([n.ip for n in own]),
                    "pool_node_count": str(len(own)),
                }
                if own
                else {}
            )
        return self._data


#: A one-node service's: its instance's own node stands in (see :func:`instance_values`).
NO_OWN_NODES = OwnNodes(())


def instance_values(
    ctx: PlanContext,
    node: Node,
    index: int,
    role: str,
    own: OwnNodes,
    step: str,
    worker: Worker | None,
    rank: int,
) -> dict[str, str]:
    """Placeholder values of one instance: the job's, the instance's, then the pool's."""
    name = node.name
    ip = node.ip
    values = {
        **ctx.common,
        "node": name,
        "node_ip": ip,
        "node_id": str(ctx.node_ids.get(name, index)),
        "index": str(index),
        "role": role,
        "pool_node": name,
        "pool_ip": ip,
        "pool_nodes": name,
        "pool_ips": ip,
        "pool_node_count": "1",
        "work_dir": ctx.paths.work_dir(step),
        "local_dir": ctx.paths.local_dir(step),
        **own.get(),
    }
    if worker is not None:
        values.update(
            worker_role=worker.role,
            worker_index=str(worker.index),
            worker_node_rank=str(rank),
            worker_gpus=",".join([str(g) for g in worker.gpus]),
            worker_gpu_count=str(len(worker.gpus)),
            worker_port=str(worker.port) if worker.port is not None else "",
        )
    return values


class LazyValues(Mapping[str, str]):
    """An instance's placeholder values, built on first use: most instances of a large plan
    have nothing to render, and building ~25 entries each is most of their planning cost."""

    __slots__ = ("_args", "_data")

    def __init__(
        self,
        ctx: PlanContext,
        node: Node,
        index: int,
        role: str,
        own: OwnNodes,
        step: str,
        worker: Worker | None,
        rank: int,
    ) -> None:
        self._args = (ctx, node, index, role, own, step, worker, rank)
        self._data: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._data is None:
            self._data = instance_values(*self._args)
        return self._data

    def __getitem__(self, key: str) -> str:
        data = self._data
        if data is None:
            data = self._data = instance_values(*self._args)
        return data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def render_all(items: list[str] | None, values: Mapping[str, str]) -> list[str]:
    # the ``"{" in v`` test saves a call for the many arguments without a placeholder
    return [render(v, values) if "{" in v else v for v in items or ()]


def render_env(env: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    return {k: render(v, values) if "{" in v else v for k, v in env.items()}


def joined_preamble(*parts: str | None) -> str | None:
    """Shell snippets (the kind's, then the recipe's) as one, blank ones left out."""
    kept = [p.strip("\n") for p in parts if p and p.strip()]
    return "\n".join(kept) if kept else None


def with_local_dir(
    preamble: str | None,
    local_dir: str,
    argv: list[str],
    env: Mapping[str, str],
    files: Mapping[str, str] | None = None,
) -> str | None:
    """``preamble`` with ``mkdir -p`` of the instance's node-local dir first, when its
    rendered argv, environment, preamble or files (a server's config file) name it: the
    directory must exist on the instance's own node before the command runs, and only
    there can it be made."""
    if not (
        local_dir in "\0".join(argv)
        or any(local_dir in v for v in env.values())
        or (preamble is not None and local_dir in preamble)
        or (files is not None and any(local_dir in v for v in files.values()))
    ):
        return preamble
    return joined_preamble(f"mkdir -p -- {shlex.quote(local_dir)}", preamble)
