"""Running a plugin's code (its import, its hooks) so that nothing it raises or does ends
srt: whatever it raises becomes an ordinary exception that the caller reports as the
plugin's failure, and an import that does not finish is given up after a deadline.

A plugin is Python code and may raise anything: ``SystemExit`` (a module that calls
``sys.exit`` when imported), ``KeyboardInterrupt``, ``GeneratorExit`` or its own
``BaseException`` subclass. Left alone, ``SystemExit(0)`` at import makes ``srt validate``
exit 0 without a verdict and ``srt run`` exit 0 without running anything. Here each is
wrapped in :class:`PluginEscaped` (an ``Exception``), so the plugin is quarantined like any
other failure and the command goes on to its own verdict and exit status.

One exception is not the plugin's: the user's Ctrl-C. While plugin code runs in the main
thread with Python's default SIGINT handler, that handler is replaced by one that notes
the signal, so a ``KeyboardInterrupt`` the user caused still ends the command (exit 130)
and one the plugin raised by itself does not.

An import that hangs (a network mount, a lock, a server it waits for) would hang every
command that needs the plugin; in the main thread a deadline (``SIGALRM``) interrupts it
after :func:`import_timeout` seconds and the plugin is reported as failed, with the advice
to declare its capabilities (then srt imports it only for recipes that use them).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: Seconds an import may take before it is given up (``SRT_PLUGIN_IMPORT_TIMEOUT``
#: overrides; ``0`` means no limit). Generous: a plugin importing a large library from a
#: network filesystem on a login node can take tens of seconds.
DEFAULT_IMPORT_TIMEOUT = 60.0


class PluginEscaped(Exception):
    """A plugin raised something that is not an ``Exception``; ``original`` is it."""

    def __init__(self, original: BaseException) -> None:
        text = str(original)
        super().__init__(f"{type(original).__name__}{f': {text}' if text else ''}")
        self.original = original


class PluginTimedOut(Exception):
    """A plugin's import did not finish within its deadline."""


class _Deadline(BaseException):
    """Raised into the plugin's code by the SIGALRM handler (not an ``Exception``, so a
    plugin's ``except Exception`` cannot swallow it)."""


def import_timeout(env: dict[str, str] | None = None) -> float | None:
    """The import deadline in seconds (``None``: no limit)."""
    raw = (os.environ if env is None else env).get("SRT_PLUGIN_IMPORT_TIMEOUT", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT
    if math.isnan(value) or value <= 0:  # 0 or less: no limit
        return None
    return min(value, 24 * 3600.0)


class _Signals:
    """The SIGINT and SIGALRM handlers while plugin code runs, and putting back the ones
    from before."""

    def __init__(self, deadline: float | None) -> None:
        self.interrupted = False
        self.armed = False
        self.old_int: Any = None
        self.old_alarm: Any = None
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers belong to the main thread: no guard, no deadline
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.old_int = signal.signal(signal.SIGINT, self.on_sigint)
        if deadline is not None and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL:
            self.old_alarm = signal.signal(signal.SIGALRM, self.on_alarm)
            self.armed = True
            signal.setitimer(signal.ITIMER_REAL, deadline)

    def on_sigint(self, signum: int, frame: object) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def on_alarm(self, signum: int, frame: object) -> None:
        if self.armed:  # a late one, after the block ended, does nothing
            raise _Deadline

    def disarm(self) -> None:
        while True:
            try:
                self.armed = False  # from here on the handler raises nothing
                if self.old_alarm is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.signal(signal.SIGALRM, self.old_alarm)
                if self.old_int is not None:
                    signal.signal(signal.SIGINT, self.old_int)
                return
            except _Deadline:  # fired just before ``armed`` was cleared: do it again
                continue


@contextlib.contextmanager
def plugin_code(deadline: float | None = None) -> Iterator[None]:
    """Run plugin code: raise :class:`PluginEscaped` for what is not an ``Exception``,
    :class:`PluginTimedOut` after ``deadline`` seconds (main thread only), and let a
    user's Ctrl-C through as ``KeyboardInterrupt``."""
    guard = _Signals(deadline)
    try:
        yield
    except _Deadline:
        raise PluginTimedOut(f"did not finish within {deadline:g}s") from None
    except KeyboardInterrupt as exc:
        if guard.interrupted:
            raise
        raise PluginEscaped(exc) from exc
    except Exception:
        raise
    except BaseException as exc:  # SystemExit, GeneratorExit, a plugin's own class
        raise PluginEscaped(exc) from exc
    finally:
        guard.disarm()
