"""Platform ids as ``<os>-<arch>``, the value of OARBANK_PLATFORM and of manifest ``platforms``.

A manifest may name an OS alone (``linux``) or an OS and architecture (``linux-aarch64``);
architecture spellings are normalised so ``amd64``/``x86_64`` and ``arm64``/``aarch64`` match.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence

_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
_OS_ALIASES = {"linux2": "linux", "win32": "windows", "cygwin": "windows"}


def normalise(value: str) -> str:
    os_name, _, arch = value.strip().lower().partition("-")
    os_name = _OS_ALIASES.get(os_name, os_name)
    if not arch:
        return os_name
    return f"{os_name}-{_ARCH_ALIASES.get(arch, arch)}"


def current_platform() -> str:
    os_name = _OS_ALIASES.get(sys.platform, sys.platform)
    arch = platform.machine().lower() or "unknown"
    return normalise(f"{os_name}-{arch}")


def platform_matches(allowed: Sequence[str], current: str) -> bool:
    """An empty list means "everywhere"; an OS-only entry matches every architecture."""
    if not allowed:
        return True
    here = normalise(current)
    here_os = here.partition("-")[0]
    for entry in allowed:
        wanted = normalise(entry)
        if wanted == here or ("-" not in wanted and wanted == here_os):
            return True
    return False
