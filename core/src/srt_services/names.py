"""Name rules for everything that ends up in a path, a step name or an environment.

One rule for every user-chosen name (CNI's container-id rule, capped like a DNS label) is
easier to explain and to fuzz than per-field variations, and it is what keeps a recipe from
writing outside the job directory: such a name can never be ``..``, hold a ``/`` or start
with ``-`` (which tools would read as an option).
"""

from __future__ import annotations

import re

NAME_MAX = 63
#: The same rules as patterns for pydantic-core's regex engine, where ``$`` is the end of
#: the text (in Python's ``re`` it also matches before a final newline, hence ``\Z`` below).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
NAME_RE = re.compile(NAME_PATTERN.removesuffix("$") + r"\Z")
ENV_NAME_RE = re.compile(ENV_NAME_PATTERN.removesuffix("$") + r"\Z")

#: Loader variables that change what every process executes. A recipe must opt in to set
#: them (``allow_loader_env: true`` on the entry) because a typo here breaks every binary.
DANGEROUS_ENV = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONSTARTUP"})


#: A job's ``env_passthrough`` entry: a variable name, or a prefix ending in ``*``.
PASSTHROUGH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*\*?$"
#: Loader variables a passthrough pattern never matches (one may still be named exactly
#: only where the checks allow it): a ``LD_*`` meant for ``LD_LIBRARY_PATH`` must not
#: carry the submitting shell's ``LD_PRELOAD`` into every service.
NEVER_BY_PATTERN = frozenset({"LD_PRELOAD", "LD_AUDIT", "PYTHONSTARTUP"})


def passthrough_split(
    entries: tuple[str, ...] | list[str],
) -> tuple[frozenset[str], tuple[str, ...]]:
    """(exact names, prefixes) of passthrough entries (``NCCL_*`` is the prefix ``NCCL_``)."""
    names = frozenset(e for e in entries if not e.endswith("*"))
    prefixes = tuple(e[:-1] for e in entries if e.endswith("*"))
    return names, prefixes


def name_problem(value: str) -> str | None:
    """Why ``value`` is not a safe name, or ``None`` when it is."""
    if not value:
        return "must not be empty"
    if "\x00" in value:
        return "must not contain NUL"
    if len(value) > NAME_MAX:
        return f"must be at most {NAME_MAX} characters (got {len(value)})"
    if NAME_RE.match(value):
        return None
    if "\n" in value or "\r" in value:
        return f"must not contain a line break, got {value!r}"
    if value in {".", ".."} or "/" in value:
        return f"must be a single path-safe token, got {value!r}"
    if value.startswith("-"):
        return f"must not start with '-', got {value!r}"
    return (
        "may only hold ASCII letters, digits, '_', '.' and '-', and must start with a letter"
        f" or digit; got {value!r}"
    )


def env_name_problem(value: str) -> str | None:
    """Why ``value`` cannot be an environment variable name, or ``None``."""
    if ENV_NAME_RE.match(value):
        return None
    return f"environment variable names must match [A-Za-z_][A-Za-z0-9_]*; got {value!r}"


def env_key(name: str) -> str:
    """``SRT_SERVICE_<KEY>`` spelling of a service name (upper case, non-alnum to ``_``)."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()
