"""``python -m srt_oarbank.node_agent``: the node agent srt's ``oarbank`` kind launches
for a service that takes admissions (``options.admissions: true``).

The protocol library's node agent (:mod:`oarbank_protocol.agent.node`), which starts an
``on_demand`` service for the first admission that needs it and stops it after its
``idle_timeout_s`` with none, plus what an srt job needs around it: the job's live attempts
kept in ``--live-attempts`` (so objects of a unit that died are reaped on the period), and
the control socket's directory made first (it sits in the instance's node-local
``{local_dir}``, short enough for a Unix socket whatever the job directory's length).
"""

from __future__ import annotations

import sys

from oarbank_protocol.agent.node import main as protocol_main
from oarbank_protocol.agent.node.cli import build_parser

from srt_oarbank.agent import with_live_attempts

PROG = "python -m srt_oarbank.node_agent"


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args, _ = build_parser(prog).parse_known_args(args_list)
    if args.socket is not None:
        args.socket.parent.mkdir(parents=True, exist_ok=True)
    return with_live_attempts(args, lambda: protocol_main(args_list, prog=prog))


if __name__ == "__main__":
    raise SystemExit(main())
