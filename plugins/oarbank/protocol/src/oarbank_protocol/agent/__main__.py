"""``python -m oarbank_protocol.agent``: the one-service foreground agent (see ``service``)."""

from oarbank_protocol.agent.service import main

raise SystemExit(main())
