"""The ``srt`` console script's first code: a Ctrl-C that lands before srt's own handling.

:func:`srt_services.cli.main.main` maps a Ctrl-C to exit 130 once a command runs, but importing
that module (rich-click, click) takes tens of milliseconds, and a Ctrl-C during it, or
after the command returned while the interpreter winds down, would print a traceback and
end the process by the signal instead. This module imports nothing heavy, so the console
script reaches its ``try`` at once and every Ctrl-C ends the same way: exit 130, no trace.
"""

from __future__ import annotations

import signal
import sys

#: The exit status of a command the user interrupted (128 + SIGINT), as shells report it.
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    try:
        from srt_services.cli.main import main as run_command

        run_command(argv)
    except KeyboardInterrupt:
        # A second Ctrl-C while the interpreter exits must not bring the traceback back.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.exit(INTERRUPTED)
