"""Pinning ``source.rev`` to a commit at submit time (``srt apply``).

A job may wait in the queue for hours; a tag can be moved and a PR ref is pushed to. The
commit each ``rev`` names *now* is written as ``source.sha`` into the staged copy of the
recipe (the user's file is untouched), so the job checks out exactly what was reviewed.
``git ls-remote`` is asked for the tag (with its peeled ``^{}`` form preferred: an annotated
tag's own object is not a commit) and the branch of that name; a rev that only matches a
branch is refused, because a branch moves by design. ``srt run`` resolves an unpinned rev
the same way before it builds (:class:`srt_services.supervise.builds.Builder`), with the
pieces here (:func:`ls_remote_argv`, :func:`parse_refs`, :func:`pick`) run through its own
child watcher.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from srt_services.errors import SrtError
from srt_services.recipe.revs import is_full_sha

LS_REMOTE_TIMEOUT = 60.0
_HEX = re.compile(r"\A[0-9a-f]{4,63}\Z")


class PinError(SrtError):
    pass


@dataclass(frozen=True, slots=True)
class Pin:
    path: str
    git: str
    rev: str
    sha: str | None
    error: str | None = None
    #: where the rev is in the document (``("services", 3, "source", "rev")``), for the
    #: line of an error
    at: tuple[str | int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "git": self.git,
            "rev": self.rev,
            "sha": self.sha,
            "error": self.error,
        }


def git_env() -> dict[str, str]:
    """No prompt for credentials (a job has no terminal), and nothing else of ours."""
    return {
        "GIT_TERMINAL_PROMPT": "0",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
    }


def ls_remote_argv(git: str, rev: str) -> list[str]:
    """The ``git ls-remote`` that answers what ``rev`` names: the tag (and its peeled
    ``^{}`` form: an annotated tag's own object is not a commit), the branch of that name
    (to refuse it), or the full ref."""
    if rev.startswith("refs/"):
        patterns = [rev, f"{rev}^{{}}"]
    else:
        patterns = [f"refs/tags/{rev}", f"refs/tags/{rev}^{{}}", f"refs/heads/{rev}"]
    return ["git", "ls-remote", "--", git, *patterns]


def parse_refs(stdout: str) -> dict[str, str]:
    """``<sha> TAB <ref>`` lines to ``{ref: sha}``."""
    refs: dict[str, str] = {}
    for line in stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if sha and ref:
            refs[ref.strip()] = sha.strip()
    return refs


def pick(git: str, rev: str, refs: dict[str, str]) -> str:
    """The commit ``rev`` names among ``refs`` (what :func:`ls_remote_argv` listed).

    A tag wins over a branch of the same name (git's own order); a name that only a branch
    has is refused, because the job would build whatever the branch points at by then.
    """
    full = rev if rev.startswith("refs/") else f"refs/tags/{rev}"
    for ref in (f"{full}^{{}}", full):
        if ref in refs:
            return refs[ref]
    if rev.startswith("refs/heads/") or f"refs/heads/{rev}" in refs:
        raise PinError(
            f"{rev!r} is a branch of {git}, and a branch moves: use a tag or a full commit SHA"
        )
    hint = ""
    if _HEX.match(rev):
        hint = "; if it is an abbreviated commit SHA, write all 40 hex digits"
    raise PinError(f"{rev!r} is not a tag or ref of {git}{hint}")


def resolve_rev(git: str, rev: str) -> str:
    """The full commit SHA ``rev`` names now (asks the remote unless it is one already)."""
    if is_full_sha(rev):
        return rev
    try:
        out = subprocess.run(
            ls_remote_argv(git, rev),
            capture_output=True,
            text=True,
            timeout=LS_REMOTE_TIMEOUT,
            env=git_env(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise PinError(
            f"git ls-remote {git} did not answer within {LS_REMOTE_TIMEOUT:g}s"
        ) from None
    except FileNotFoundError:
        raise PinError("git is not installed") from None
    if out.returncode != 0:
        raise PinError(f"git ls-remote {git} failed: {out.stderr.strip() or out.returncode}")
    return pick(git, rev, parse_refs(out.stdout))


def pin_sources(data: dict[str, Any]) -> list[Pin]:
    """Write ``source.sha`` into every service entry whose source is not pinned yet; a rev
    that cannot be pinned (a branch, unknown, the remote unreachable) is returned with its
    ``error`` and left as it was (``srt apply`` then refuses to submit)."""
    pins: list[Pin] = []
    for i, entry in enumerate(data.get("services") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), dict):
            continue
        source = entry["source"]
        git, rev = source.get("git"), source.get("rev")
        if not isinstance(git, str) or not isinstance(rev, str):
            continue
        where = f"services[{entry.get('name', i)}].source"
        at = ("services", i, "source", "rev")
        if source.get("sha"):
            pins.append(Pin(where, git, rev, str(source["sha"]), at=at))
            continue
        try:
            sha = resolve_rev(git, rev.strip())
        except PinError as exc:
            pins.append(Pin(where, git, rev, None, str(exc), at=at))
            continue
        source["sha"] = sha
        pins.append(Pin(where, git, rev, sha, at=at))
    return pins
