"""``python -m oarbank_protocol.conformance``: run the checks against an executable."""

from oarbank_protocol.conformance.cli import main

raise SystemExit(main(prog="python -m oarbank_protocol.conformance"))
