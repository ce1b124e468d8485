"""What ``observability.metrics: true`` (the default) implies.

The exporters the spec lists, plus the scraper that makes them worth running:

* ``node-exporter`` and ``dcgm-exporter`` on every compute node (engine workers and pools),
  only when the job has such nodes;
* ``process-exporter`` on every node of the job (its kind's default, ``all``);
* ``prometheus`` on the infra node, scraping every target of the job, at an interval chosen
  from how long the job may run (:func:`scrape_interval_for`);
* the process-exporter's groups named after the job's services and roles
  (:mod:`.jobgroups`).

Each looks its binary up on the node that runs it, at launch (``if_missing: skip``): a node
without it runs the job without that instance (``unavailable``, with the reason), so the
default never breaks a job where nothing is installed; a service declared under the
same name replaces the implied one (``enabled: false`` switches it off). The implied
dcgm-exporter is not restarted: its usual failure, no GPU ("Failed to initialize NVML"),
does not go away by retrying.
"""

from __future__ import annotations

import re

from srt_services.extend import ImpliedService, Recipe

from srt_exporters.common import REASON
from srt_exporters.jobgroups import job_groups
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
    out.append(_service(PROCESS, {}, options={"groups": job_groups(recipe)}))
    interval: dict[str, object] = {"scrape_interval_seconds": scrape_interval_for(recipe)}
    out.append(
        _service(PROMETHEUS, {"placement": {"node": "infra"}}, SCRAPER_ORDER, options=interval)
    )
    return out


#: the longest interval chosen, the kind's own default: a long job's record stays small
LONGEST_INTERVAL = 15
#: points a job should get over its whole time limit at the chosen interval
POINTS_PER_LIMIT = 720
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def slurm_seconds(text: str) -> int | None:
    """``slurm.time`` in seconds (sbatch's forms: ``M``, ``M:S``, ``H:M:S``, ``D-H``,
    ``D-H:M``, ``D-H:M:S``); ``None`` for what is not one (``UNLIMITED``...)."""
    m = _SLURM_TIME.match(text.strip())
    if m is None:
        return None
    days, a, b, c = (int(g) if g is not None else None for g in m.groups())
    assert a is not None
    if days is not None:  # D-H[:M[:S]]
        return days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    if c is not None:  # H:M:S
        return a * 3600 + (b or 0) * 60 + c
    return a * 60 + (b or 0)  # M[:S]


def scrape_interval_for(recipe: Recipe) -> int:
    """Seconds between scrapes of the implied Prometheus, from how long the job may run.

    Prometheus cannot change its interval while it runs, and a rate needs two scrapes, so
    at 15 s a short job's first quarter minute was blank and a 2-minute job had 8 points.
    The interval is the job's time limit (``slurm.time``) over :data:`POINTS_PER_LIMIT`,
    between 1 s and 15 s: a job of up to 12 minutes is scraped every second, a 1-hour
    one every 5 s, a 3-hour one or longer every 15 s. Without a limit (a local
    ``srt run``, the usual short try-out) it is 1 s: a dozen targets cost Prometheus
    about 0.01-0.02 of a core and 50 MB of record per hour (process-exporter, dearer to
    scrape, is taken every 2 s at most: see the prometheus kind). A declared ``prometheus``
    service keeps its own ``scrape_interval_seconds``.
    """
    limit = slurm_seconds(recipe.slurm.time) if recipe.slurm.time else None
    if limit is None:
        return 1
    return max(1, min(LONGEST_INTERVAL, round(limit / POINTS_PER_LIMIT)))


def _service(
    kind: str,
    extra: dict[str, object],
    order: int = EXPORTERS_ORDER,
    options: dict[str, object] | None = None,
) -> ImpliedService:
    entry: dict[str, object] = {
        "name": kind,
        "type": kind,
        "options": {"if_missing": "skip", **(options or {})},
        **extra,
    }
    # a declared one of the same kind under another name would fight for the same port
    return ImpliedService(entry=entry, reason=REASON, unless_type_declared=(kind,), order=order)
