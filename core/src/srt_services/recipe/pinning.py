"""Pinning ``source.rev`` to a commit at submit time (``srt apply``).

A job may wait in the queue for hours; a tag can be moved and a PR ref is pushed to. The
commit each ``rev`` names *now* is written as ``source.sha`` into the staged copy of the
recipe (the user's file is untouched), so the job checks out exactly what was reviewed.
``git ls-remote`` is asked for the rev, the tag (with its peeled ``^{}`` form preferred: an
annotated tag's own object is not a commit) and the branch; a rev that only matches a branch
is refused, because a branch moves by design.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from srt_services.errors import SrtError

LS_REMOTE_TIMEOUT = 60.0
_SHA40 = re.compile(r"^[0-9a-f]{40}$")


class PinError(SrtError):
    pass


@dataclass(frozen=True, slots=True)
class Pin:
    path: str
    git: str
    rev: str
    sha: str | None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "git": self.git,
            "rev": self.rev,
            "sha": self.sha,
            "error": self.error,
        }


def ls_remote(git: str, patterns: list[str]) -> dict[str, str]:
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    try:
        out = subprocess.run(
            ["git", "ls-remote", git, *patterns],
            capture_output=True,
            text=True,
            timeout=LS_REMOTE_TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PinError(
            f"git ls-remote {git} did not answer within {LS_REMOTE_TIMEOUT:g}s"
        ) from None
    if out.returncode != 0:
        raise PinError(f"git ls-remote {git} failed: {out.stderr.strip() or out.returncode}")
    refs: dict[str, str] = {}
    for line in out.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if sha and ref:
            refs[ref.strip()] = sha.strip()
    return refs


def resolve_rev(git: str, rev: str) -> str:
    if _SHA40.match(rev):
        return rev
    if rev.startswith("refs/"):
        patterns = [rev, f"{rev}^{{}}"]
    else:
        patterns = [f"refs/tags/{rev}", f"refs/tags/{rev}^{{}}", f"refs/heads/{rev}", rev]
    refs = ls_remote(git, patterns)
    for ref in (f"refs/tags/{rev}^{{}}", f"refs/tags/{rev}", f"{rev}^{{}}", rev):
        if ref in refs and not ref.startswith("refs/heads/"):
            return refs[ref]
    if f"refs/heads/{rev}" in refs:
        raise PinError(f"{rev!r} is a branch of {git}; branches move, so pin a tag or a commit")
    raise PinError(f"{rev!r} not found in {git}")


def pin_sources(data: dict[str, Any]) -> list[Pin]:
    """Write ``source.sha`` into every service entry whose source is not pinned yet."""
    pins: list[Pin] = []
    for i, entry in enumerate(data.get("services") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), dict):
            continue
        source = entry["source"]
        git, rev = source.get("git"), source.get("rev")
        if not isinstance(git, str) or not isinstance(rev, str):
            continue
        where = f"services[{entry.get('name', i)}].source"
        if source.get("sha"):
            pins.append(Pin(where, git, rev, str(source["sha"])))
            continue
        try:
            sha = resolve_rev(git, rev.strip())
        except PinError as exc:
            pins.append(Pin(where, git, rev, None, str(exc)))
            continue
        source["sha"] = sha
        pins.append(Pin(where, git, rev, sha))
    return pins
