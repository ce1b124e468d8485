"""Helpers for kinds that run one server binary and advertise it by URL (etcd, NATS, ...).

Plugins must not import each other, so what every such kind needs lives here: the URL form
of a node address, where the binary comes from, the rule for the ``binary`` option, and the
shell line that turns a missing binary into a clear, early failure.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.recipe.models import ServiceSpec


def url_host(ip: str) -> str:
    """An IP as the host part of a URL (IPv6 needs brackets, or the port reads as a group)."""
    return f"[{ip}]" if ":" in ip and not ip.startswith("[") else ip


def server_binary(choice: str | None, key: str) -> str:
    """The recipe's choice, else the site config's ``[binaries] <key>``, else ``key`` on PATH.

    Looked up by name rather than resolved here: planning must not touch the machine (dry
    runs happen on a login node), and the service's own node is where the binary must exist.
    """
    if choice:
        return choice
    from srt_services import site_config

    return site_config.current().binaries.get(key) or key


def binary_option_problems(spec: ServiceSpec, binary: str | None) -> list[Problem]:
    """Problems of an ``options.binary`` value, relative to the service."""
    where = ("options", "binary")
    if binary is None:
        return []
    if not binary.strip():
        return [Problem(where, "must not be blank (omit it to use the default)")]
    if "/" in binary and not binary.startswith("/"):
        return [
            Problem(
                where,
                f"must be a command name looked up on PATH or an absolute path, got {binary!r}"
                " (a relative path would depend on the directory srt was started from)",
            )
        ]
    if spec.command is not None and spec.external is None:
        return [
            Problem(
                where,
                "has no effect: the recipe's command replaces the kind's command",
                warning=True,
            )
        ]
    return []


def missing_binary_check(binary: str, kind: str, hint: str) -> str:
    """Shell that fails fast, with install advice, when the server binary is not there.

    It runs on the service's node, in its environment (container included), right before the
    server would start, so it checks the filesystem that matters; the infra phase then fails
    with this line in the log tail, before any worker or frontend is launched.
    """
    text = f"srt-{kind}: cannot find the {kind} server binary {binary}; {hint}"
    for ch in ("\\", '"', "`", "$"):  # literal inside double quotes
        text = text.replace(ch, "\\" + ch)
    if "/" not in binary:
        text += " (PATH=$PATH)"  # a bare name: where it was looked for is the useful part
    found = f"command -v -- {shlex.quote(binary)} >/dev/null 2>&1"
    return f'{found} || {{ echo "{text}" >&2; exit 127; }}'
