"""``{placeholder}`` rendering: one pass, known names only, ``{{name}}`` for a literal.

Only ``{identifier}`` is a placeholder, so JSON in an env value (``{"a": {"b": 1}}``) is
left alone without escaping, and so is shell syntax: ``${HOME}`` in a preamble is the
shell's, never ours. A ``{name}`` that srt does not know is an error at load time
(a typo such as ``{nod}`` would otherwise reach the process verbatim). Rendering is a single
pass (``str.format_map``), so a value that itself contains ``{node}`` is never substituted
twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

PLACEHOLDER_RE = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: Names every service, worker, frontend and benchmark may use.
COMMON: frozenset[str] = frozenset(
    {
        "node",
        "node_ip",
        "node_id",
        "index",
        "role",
        "head_node",
        "head_ip",
        "infra_node",
        "infra_ip",
        "master_port",
        "metadata_port",
        "gpus_per_node",
        "pool_node",
        "pool_ip",
        "pool_nodes",
        "pool_ips",
        "pool_node_count",
        "job_dir",
        "log_dir",
        "work_dir",
        "local_dir",
        "local_job_dir",
        "job_id",
        "job_name",
        "frontend_port",
        "recipe_dir",
        # the interpreter srt itself runs under: a hand-written command that needs a module
        # installed next to srt (``{python} -m dynamo.frontend``) whatever PATH holds
        "python",
        # where each role's workers are, for a frontend or router that must find them
        *(
            f"{role}_{what}"
            for role in ("prefill", "decode", "agg")
            for what in ("nodes", "ips", "endpoints")
        ),
    }
)
#: Names only instances attached to an engine worker see (workers, ``per: worker``).
WORKER: frozenset[str] = frozenset(
    {
        "worker_role",
        "worker_index",
        "worker_node_rank",
        "worker_gpus",
        "worker_gpu_count",
        "worker_port",
    }
)
ALL: frozenset[str] = COMMON | WORKER


def unknown_in(text: str, allowed: frozenset[str]) -> list[str]:
    """Placeholder names in ``text`` that ``allowed`` does not hold, in order."""
    if "{" not in text:
        return []
    return list(_unknown_cached(text, allowed))


def unknown_placeholders(text: str, attached_to_worker: bool = False) -> list[str]:
    """Placeholder names in ``text`` that srt would not render for an instance (one attached
    to a worker knows the ``{worker_*}`` names too): for a kind that accepts a path or a
    template in its options and must refuse a typo at load time, like the recipe's own
    strings."""
    return unknown_in(text, ALL if attached_to_worker else COMMON)


@lru_cache(maxsize=8192)
def _unknown_cached(text: str, allowed: frozenset[str]) -> tuple[str, ...]:
    # Generated recipes repeat the same strings ("{node_ip}", JSON env values) thousands of
    # times; one scan per distinct string is enough.
    return tuple(name for _, name in PLACEHOLDER_RE.findall(text) if name and name not in allowed)


class UnknownPlaceholder(KeyError):
    pass


def render(text: str, values: Mapping[str, str]) -> str:
    """Substitute placeholders; raise :class:`UnknownPlaceholder` for a name not in values."""
    if "{" not in text:
        return text
    try:
        return _format_string(text).format_map(values)
    except KeyError as exc:
        raise UnknownPlaceholder(exc.args[0]) from None


@lru_cache(maxsize=8192)
def _format_string(text: str) -> str:
    """``text`` as a :meth:`str.format_map` template, built once per distinct text.

    Every literal brace is doubled and every placeholder becomes ``{name}``, so the
    substitution runs in C instead of a Python loop per instance of every service. A
    placeholder is an identifier, which ``format_map`` takes as a plain key (no attribute,
    index or conversion syntax can reach it), and escapes resolve to literal text.
    """
    out: list[str] = []
    last = 0
    for m in PLACEHOLDER_RE.finditer(text):
        out.append(_literal(text[last : m.start()]))
        last = m.end()
        if m.group(1) is not None:  # {{name}} -> a literal {name}
            out.append("{{" + m.group(1) + "}}")
        else:
            out.append("{" + m.group(2) + "}")
    out.append(_literal(text[last:]))
    return "".join(out)


def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@lru_cache(maxsize=4096)
def suggestion(name: str, allowed: frozenset[str]) -> str:
    """The closest known placeholder, as a hint; remembered, as a recipe that repeats an
    unknown name a million times would otherwise pay difflib a million times."""
    from difflib import get_close_matches

    close = get_close_matches(name, sorted(allowed), n=1)
    return f" (did you mean {{{close[0]}}}?)" if close else ""
