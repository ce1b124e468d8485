"""``python -m srt_oarbank.conformance``: run the checks against an executable."""

from srt_oarbank.conformance.cli import main

raise SystemExit(main())
