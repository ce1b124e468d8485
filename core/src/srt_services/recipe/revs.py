"""Which ``source.rev`` values name an immutable commit, decided without the network.

A job checks out a rev long after the recipe was reviewed (the queue, a restart), so only
names that keep pointing at one commit are accepted: a full commit SHA, a tag, or
``refs/pull/<n>/head`` (which ``srt apply`` pins to its commit at submit time). What can be
refused from the text alone is refused at load time:

* branch-like names srt knows (``main``, ``develop``...), ``refs/heads/...`` and any other
  ``refs/`` namespace than tags and PR heads;
* revision expressions (``HEAD~1``, ``v1^``, ``main@{yesterday}``): they are relative to a
  moving ref, and git forbids their characters in ref names anyway;
* abbreviated SHAs of 7 to 39 hex digits: ``git ls-remote`` cannot resolve one (a remote
  only advertises refs), a fetch by a short SHA fails, and a prefix unique today can become
  ambiguous as the repository grows. Shorter hex words (``beef``, ``2024``) are read as tag
  names, since tags like those exist.

Whether a plain name (``v1.2``, ``release/x``) is a tag or a branch only the remote can
say: ``srt apply`` and ``srt run`` resolve it with ``git ls-remote`` and refuse a branch
(:mod:`srt_services.recipe.pinning`).
"""

from __future__ import annotations

import re

#: A full object name: SHA-1 (40 hex digits) or SHA-256 (64).
FULL_SHA_RE = re.compile(r"\A(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
#: What reads as an abbreviated SHA rather than a tag name: git's shortest default
#: abbreviation (7) up to one digit short of a full name, with at least one letter.
_ABBREVIATED_RE = re.compile(r"\A(?=[0-9]*[a-f])[0-9a-f]{7,63}\Z")
_PULL_HEAD_RE = re.compile(r"\Arefs/pull/[0-9]+/head\Z")
#: Names that are branches (or symbolic refs) in every repository that has them.
MOVING_NAMES = frozenset(
    {
        "main",
        "master",
        "trunk",
        "develop",
        "development",
        "dev",
        "latest",
        "HEAD",
        "FETCH_HEAD",
        "ORIG_HEAD",
        "MERGE_HEAD",
        "@",
    }
)
#: Characters git refuses in a ref name (``git check-ref-format``); in a rev they make a
#: revision expression (``~``, ``^``, ``:``) or a pattern.
_NOT_IN_REF_NAMES = re.compile(r"[~^:?*\[\\\x00-\x20\x7f]|\.\.|@\{|//")

IMMUTABLE = "a full commit SHA, a tag, or refs/pull/<n>/head"


def is_full_sha(value: str) -> bool:
    return FULL_SHA_RE.match(value) is not None


def rev_problem(rev: str) -> str | None:
    """Why ``rev`` cannot be a ``source.rev`` (``None``: a full SHA, or a name that a remote
    may resolve to a tag or a PR head; :func:`~srt_services.recipe.pinning.resolve_rev`
    decides which)."""
    if is_full_sha(rev.lower()):
        return None
    if rev.startswith("refs/"):
        if rev.startswith("refs/heads/"):
            return f"must be {IMMUTABLE}, not the branch {rev!r} (branches move)"
        if rev.startswith("refs/tags/") and len(rev) > len("refs/tags/"):
            return _name_problem(rev, rev.removeprefix("refs/tags/"))
        if _PULL_HEAD_RE.match(rev):
            return None
        if rev.startswith("refs/pull/"):
            return (
                f"must be {IMMUTABLE}; {rev!r} is recomputed whenever the base branch moves:"
                " use refs/pull/<n>/head"
            )
        return f"must be {IMMUTABLE}; {rev!r} is not a tag or a PR head"
    if rev in MOVING_NAMES:
        return f"must be {IMMUTABLE}, not the moving {rev!r} (it follows new commits)"
    if _ABBREVIATED_RE.match(rev):
        return (
            f"{rev!r} looks like an abbreviated commit SHA; write all 40 hex digits"
            f" (`git rev-parse {rev}`): a short SHA cannot be pinned or fetched by srt"
        )
    return _name_problem(rev, rev)


def _name_problem(rev: str, name: str) -> str | None:
    """Refuse what cannot be a tag name: a revision expression or an invalid ref name."""
    if (
        _NOT_IN_REF_NAMES.search(name)
        or name.startswith(("-", "/", "."))
        or name.endswith(("/", ".", ".lock"))
        or "/." in name
    ):
        return (
            f"must be {IMMUTABLE}; {rev!r} is a revision expression or not a valid ref name"
            " (relative revisions such as HEAD~1 follow a moving ref)"
        )
    return None
