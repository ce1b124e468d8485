"""``python -m srt_oarbank.agent``: the process srt's ``oarbank`` kind launches.

It is the protocol library's one-service agent (:mod:`oarbank_protocol.agent.service`),
under the name the kind has always put in its command line. The name stays because plans
already written to job directories (and the process lists an operator greps) name it, and
because it keeps the kind's command line pointing into the distribution that declares the
kind, whatever the library calls its modules.
"""

from __future__ import annotations

from oarbank_protocol.agent.service import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m srt_oarbank.agent"))
