"""Distribution names and versions compared the way packaging tools compare them, for the
site's allow and block lists, required versions and lock files."""

from __future__ import annotations

import re


def normalize(name: str) -> str:
    """PEP 503 normalisation: what makes ``SRT_PLUGINS=srt_etcd`` match ``srt-etcd``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def same_version(a: str, b: str) -> bool:
    """Version equality as PEP 440 sees it (``1.0`` == ``1.0.0``), text equality otherwise."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
