"""``python -m srt_oarbank.conformance``: run the checks against an executable."""

from srt_oarbank.conformance.runner import main

raise SystemExit(main())
