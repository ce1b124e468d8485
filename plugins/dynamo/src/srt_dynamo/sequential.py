"""trtllm's ``sequential_node_start``: workers sharing a leader node start N at a time.

srtctl's orchestrator starts a batch, waits for each worker's ``/health``, then the next;
srt launches every worker at once, so each worker of a later batch waits in its preamble
until every worker of the batch before it on its node answers ``/health`` with 200.
"""

from __future__ import annotations

import shlex

from srt_dynamo.build import WorkerBuild

POLL = (
    "import sys, urllib.request as u\n"
    "try:\n"
    "    sys.exit(0 if u.urlopen(sys.argv[1], timeout=2).status == 200 else 1)\n"
    "except Exception:\n"
    "    sys.exit(1)\n"
)


def sequential_wait(b: WorkerBuild) -> str | None:
    batch = b.options.sequential_node_start
    if batch is None or b.recipe.engine.type != "trtllm" or not b.proc.leader:
        return None
    leader = b.proc.worker.nodes[0].name
    mine = [
        (p, s)
        for p, s in zip(b.processes, b.table, strict=True)
        if p.leader and p.worker.nodes[0].name == leader
    ]
    position = next(i for i, (p, _) in enumerate(mine) if p is b.proc)
    first = (position // batch - 1) * batch
    if first < 0:
        return None
    earlier = mine[first : first + batch]
    urls = " ".join(shlex.quote(f"http://{p.node.ip}:{s.sys_port}/health") for p, s in earlier)
    poll = shlex.quote(POLL)
    return f'for url in {urls}; do until {b.python} -c {poll} "$url"; do sleep 5; done; done'
