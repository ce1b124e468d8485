"""An inotify descriptor (inotify_simple's), opened without running ``ldconfig``.

inotify_simple finds libc with ``ctypes.util.find_library("c")`` the first time a
descriptor is opened, and on Linux that forks ``/sbin/ldconfig -p`` and parses its whole
cache: some 40 ms of ``srt run``'s start-up, paid before the first service is launched
(the orchestrator opens its descriptor first). The symbols are already in the process
(Python itself links libc), so the process's own handle serves: the library keeps the
handle in a module global that it fills only when empty. Should a later inotify_simple
drop that global, the assignment is inert and the library finds libc its own way again.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inotify_simple import INotify


def open_inotify() -> INotify:
    """A new non-inheritable inotify descriptor."""
    import inotify_simple

    if getattr(inotify_simple, "_libc", None) is None:
        inotify_simple._libc = ctypes.CDLL(None, use_errno=True)
    return inotify_simple.INotify()
