"""``python -m srt_oarbank.agent``: the one-service foreground agent (see ``service``)."""

from srt_oarbank.agent.service import main

raise SystemExit(main())
