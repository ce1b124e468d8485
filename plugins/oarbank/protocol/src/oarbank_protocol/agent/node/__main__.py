"""``python -m oarbank_protocol.agent.node``: the node agent (see the package docstring)."""

from oarbank_protocol.agent.node.cli import main

raise SystemExit(main())
