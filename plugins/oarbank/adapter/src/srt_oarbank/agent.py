"""``python -m srt_oarbank.agent``: the process srt's ``oarbank`` kind launches.

It is the protocol library's one-service agent (:mod:`oarbank_protocol.agent.service`),
under the name the kind has always put in its command line. The name stays because plans
already written to job directories (and the process lists an operator greps) name it, and
because it keeps the kind's command line pointing into the distribution that declares the
kind, whatever the library calls its modules.

Inside an srt job it also keeps the job's live attempts in the file the agent reaps by
(``--live-attempts``, :mod:`srt_oarbank.srt.live_attempts`), so objects of an instance that
died are destroyed on the reaping period rather than at the job's end. The node agent the
kind runs for a service that takes admissions (:mod:`srt_oarbank.node_agent`) does the same.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oarbank_protocol.agent.service import build_parser
from oarbank_protocol.agent.service import main as protocol_main

PROG = "python -m srt_oarbank.agent"

__all__ = ["main", "with_live_attempts"]


def with_live_attempts(
    args: argparse.Namespace, run: Callable[[], int], before: Callable[[], Any] | None = None
) -> int:
    """``run()``, with the job's live attempts kept in ``args.live_attempts`` meanwhile
    (inside an srt job: its cookie and job id are in the environment)."""
    writer = None
    if args.live_attempts is not None:
        from srt_services.extend import processes

        from srt_oarbank.srt.live_attempts import JOB_ID_VAR, LiveAttemptsWriter

        cookie, job_id = os.environ.get(processes.COOKIE_VAR), os.environ.get(JOB_ID_VAR)
        if cookie and job_id:
            writer = LiveAttemptsWriter(
                Path(args.live_attempts),
                job_id=job_id,
                cookie=cookie,
                cookie_var=processes.COOKIE_VAR,
                instance_var=processes.INSTANCE_VAR,
                # fresher than the reaping period, so a reap never reads an old list
                period_s=min(max(args.reap_period_s / 4, 0.2), 10.0),
            )
            writer.start()
    try:
        return run()
    finally:
        if writer is not None:
            writer.stop()


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args, _ = build_parser(prog).parse_known_args(args_list)
    return with_live_attempts(args, lambda: protocol_main(args_list, prog=prog))


if __name__ == "__main__":
    raise SystemExit(main())
