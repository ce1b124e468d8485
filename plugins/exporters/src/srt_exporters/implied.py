"""What ``observability.metrics: true`` (the default) implies.

The exporters the spec lists, plus the scraper that makes them worth running:

* ``node-exporter`` and ``dcgm-exporter`` on every compute node (engine workers and pools),
  only when the job has such nodes;
* ``process-exporter`` on every node of the job (its kind's default, ``all``);
* ``prometheus`` on the infra node, scraping every target of the job.

Each looks its binary up on the node that runs it, at launch (``if_missing: skip``): a node
without it runs the job without that instance (``unavailable``, with the reason), so the
default never breaks a job where nothing is installed; a service declared under the
same name replaces the implied one (``enabled: false`` switches it off). The implied
dcgm-exporter is not restarted: its usual failure, no GPU ("Failed to initialize NVML"),
does not go away by retrying.
"""

from __future__ import annotations

from srt_services.extend import ImpliedService, Recipe

from srt_exporters.common import REASON
from srt_exporters.kind import DCGM, NODE, PROCESS
from srt_exporters.prometheus import KIND as PROMETHEUS

#: ImpliedService.order: the exporters, then the scraper (the spec's observability slots)
EXPORTERS_ORDER = 60
SCRAPER_ORDER = 70


def implied(recipe: Recipe) -> list[ImpliedService]:
    if not recipe.observability.metrics:
        return []
    out: list[ImpliedService] = []
    has_compute = bool(recipe.roles) or any(s.nodes is not None for s in recipe.services)
    if has_compute:
        out.append(_service(NODE, {"placement": {"node": "compute"}}))
        out.append(
            _service(
                DCGM,
                {"placement": {"node": "compute"}, "restart": {"policy": "no"}},
            )
        )
    out.append(_service(PROCESS, {}))
    out.append(_service(PROMETHEUS, {"placement": {"node": "infra"}}, SCRAPER_ORDER))
    return out


def _service(kind: str, extra: dict[str, object], order: int = EXPORTERS_ORDER) -> ImpliedService:
    entry: dict[str, object] = {
        "name": kind,
        "type": kind,
        "options": {"if_missing": "skip"},
        **extra,
    }
    # a declared one of the same kind under another name would fight for the same port
    return ImpliedService(entry=entry, reason=REASON, unless_type_declared=(kind,), order=order)
