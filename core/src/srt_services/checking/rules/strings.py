"""Rules on the strings a recipe hands to processes: placeholders, env names, srun options.

A ``{name}`` srt does not know would reach the process verbatim, so it is refused at load
time with the closest known name; names only a worker-attached instance has are explained
as such. Generated recipes repeat the same strings thousands of times, so the common case
(no placeholder at all) is one C-level scan, and each distinct text is scanned once.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from srt_services.names import DANGEROUS_ENV
from srt_services.recipe import placeholders as ph

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.recipe.models import ProcessSpec, ServiceSpec
    from srt_services.recipe.problems import Path

_SRUN_KEY = re.compile(r"^[a-z][a-z0-9-]*$")


def text(ctx: RuleContext, path: Path, value: str, allowed: frozenset[str]) -> None:
    """Every placeholder of ``value`` that ``allowed`` does not hold, as a problem."""
    for name in ph.unknown_in(value, allowed):
        if name in ph.WORKER:
            ctx.add(
                path,
                f"{{{name}}} is only known to instances attached to a worker"
                " (roles and placement.per: worker)",
            )
        else:
            ctx.add(
                path,
                f"unknown placeholder {{{name}}}{ph.suggestion(name, allowed)}; write"
                f" {{{{{name}}}}} for a literal {{{name}}}",
            )


def strings(
    ctx: RuleContext, where: Path, key: str, values: list[str] | None, allowed: frozenset[str]
) -> None:
    """The placeholders of a list of words (``command``, ``args``, ``build_command``)."""
    if not values or "{" not in "".join(values):  # most words hold no placeholder
        return
    unknown_in = ph.unknown_in
    for i, value in enumerate(values):
        if "{" in value and unknown_in(value, allowed):  # cached per distinct text
            text(ctx, (*where, key, i), value, allowed)


def env(ctx: RuleContext, where: Path, values: dict[str, str], allowed: frozenset[str]) -> None:
    """Names srt reserves or refuses in ``env``, and the placeholders of its values."""
    unknown_in = ph.unknown_in
    for key, value in values.items():
        if key.startswith("SRT_"):
            ctx.add((*where, "env", key), "names starting with SRT_ are reserved for srt")
        elif key in DANGEROUS_ENV:
            ctx.add(
                (*where, "env", key),
                f"{key} changes how every program of the service is loaded, so srt refuses"
                " it in env; export it in `preamble` if you really mean it",
            )
        if unknown_in(value, allowed):
            text(ctx, (*where, "env", key), value, allowed)


def process(ctx: RuleContext, where: Path, spec: ProcessSpec, allowed: frozenset[str]) -> None:
    """The strings of a job process: a role's workers, the frontend, the benchmark."""
    strings(ctx, where, "command", spec.command, allowed)
    strings(ctx, where, "args", spec.args, allowed)
    env(ctx, where, spec.env, allowed)
    if spec.preamble:
        text(ctx, (*where, "preamble"), spec.preamble, allowed)
    if spec.container:
        text(ctx, (*where, "container"), spec.container, allowed)


def service(ctx: RuleContext, at: Path, spec: ServiceSpec, allowed: frozenset[str]) -> None:
    """The strings of a service entry, ``srun_options`` included."""
    strings(ctx, at, "command", spec.command, allowed)
    if spec.args:
        strings(ctx, at, "args", spec.args, allowed)
    if spec.build_command:
        strings(ctx, at, "build_command", spec.build_command, allowed)
    if spec.env:
        env(ctx, at, spec.env, allowed)
    if spec.preamble:
        text(ctx, (*at, "preamble"), spec.preamble, allowed)
    if spec.container:
        text(ctx, (*at, "container"), spec.container, allowed)
    for key, value in spec.srun_options.items():
        if not _SRUN_KEY.match(key):
            ctx.add(
                (*at, "srun_options", key),
                "srun option names are lower-case words with '-' (no leading dashes)",
            )
        text(ctx, (*at, "srun_options", key), value, allowed)
