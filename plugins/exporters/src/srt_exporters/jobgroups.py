"""Process groups named after the job's own services and roles, from the recipe.

process-exporter reports only processes that match a group, and its built-in groups know
the engines and the monitoring stack by name: a sidecar, a role running its own command,
or a frontend started from a script matched nothing, so "CPU per process group" showed
only the exporters. The implied process-exporter therefore gets one group per service,
role and frontend that has a ``command``, named after it and matching the literal words
of that command (in order); these come before the built-in groups, so a role running
``vllm serve`` is reported as ``decode``, not as ``vllm``. Words holding a placeholder
(``{node_ip}``, ``{worker_port}``) are rendered per instance and left out of the match.

A unit without a ``command`` (an engine worker whose argv the engine builds, a kind such
as etcd) is left to the built-in groups: its argv is not known from the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence

from srt_services.extend import Recipe

#: RE2 (process-exporter is Go) accepts a backslash before punctuation only, so only the
#: characters that mean something in a regular expression are escaped
_SPECIAL = set("\\.+*?()|[]{}^$")


def _escape(word: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in word)


def cmdline_pattern(argv: Sequence[str]) -> str | None:
    """A regex matching the argv (joined by spaces, as process-exporter sees it) from its
    literal words in order; ``None`` when no word is literal."""
    words = [w for w in argv if "{" not in w and w.strip()]
    if not words:
        return None
    return ".*".join(_escape(w) for w in words)


def job_groups(recipe: Recipe) -> list[dict[str, object]]:
    """``options.groups`` entries for the implied process-exporter: services first (in
    recipe order), then roles, then the frontend; one group per name."""
    found: list[tuple[str, list[str]]] = []
    for svc in recipe.services:
        if svc.enabled and svc.command:
            found.append((svc.name, [*svc.command, *svc.args]))
    for role, spec in recipe.roles.items():
        if spec.command:
            found.append((str(role), [*spec.command, *spec.args]))
    if recipe.frontend is not None and recipe.frontend.command:
        found.append(("frontend", [*recipe.frontend.command, *recipe.frontend.args]))
    groups: list[dict[str, object]] = []
    seen: set[str] = set()
    for name, argv in found:
        pattern = cmdline_pattern(argv)
        if pattern is None or name in seen:
            continue
        seen.add(name)
        groups.append({"name": name, "cmdline": [pattern]})
    return groups
