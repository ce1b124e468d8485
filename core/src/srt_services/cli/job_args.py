"""The arguments every job command shares: ``--root`` (where the jobs are) and JOBDIR (a
path, or the name of a job under the root), both completed in the shell.

``--root DIR`` is ``SRT_JOB_ROOT=DIR`` for this command: it is set in the environment (an
eager option, so it is in place before JOBDIR is resolved), so every layer below and every
process the command starts (a detached run's orchestrator) sees the same root.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import rich_click as click

F = TypeVar("F", bound=Callable[..., Any])

ROOT_HELP = (
    "Where the job directories are: the same as SRT_JOB_ROOT=DIR (default:"
    " $XDG_STATE_HOME/srt/jobs, i.e. ~/.local/state/srt/jobs)."
)


def _set_root(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None and not ctx.resilient_parsing:
        os.environ["SRT_JOB_ROOT"] = os.path.abspath(value)


def root_option(func: F) -> F:
    """``--root DIR``: the job root for this command."""
    return click.option(
        "--root",
        type=click.Path(file_okay=False),
        is_eager=True,
        expose_value=False,
        callback=_set_root,
        help=ROOT_HELP,
    )(func)


class JobDirType(click.ParamType):  # type: ignore[type-arg]
    """A job directory: a path, or a job's name under the job root (``serve-2024...``)."""

    name = "jobdir"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        found = resolve_job_dir(str(value))
        if found is None:
            from srt_services.jobdir.layout import job_root

            self.fail(f"{value} is neither a directory nor a job under {job_root()}", param, ctx)
        return found

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(n) for n in job_names(incomplete)] + [
            CompletionItem(incomplete, type="dir")
        ]


JOB_DIR = JobDirType()


def resolve_job_dir(value: str) -> str | None:
    """``value`` when it is a directory, else the job of that name under the job root."""
    from srt_services.jobdir.layout import job_root

    if os.path.isdir(value):
        return value
    if os.sep not in value and value not in ("", ".", ".."):
        candidate = os.path.join(job_root(), value)
        if os.path.isdir(candidate):
            return candidate
    return None


def job_names(prefix: str = "") -> list[str]:
    """The names of the jobs under the job root starting with ``prefix``, newest first."""
    from srt_services.jobdir.catalog import job_dirs

    names = [os.path.basename(p) for p in job_dirs()]
    return [n for n in names if n.startswith(prefix)]


def unit_names(job_dir: str | None, prefix: str = "") -> list[str]:
    """What SERVICE may name in the job: its units (services, roles), workers, steps."""
    from srt_services.jobdir.layout import JobDirError
    from srt_services.jobdir.view import JobView

    if job_dir is None:
        return []
    found = resolve_job_dir(job_dir)
    if found is None:
        return []
    try:
        plan = JobView.read(found).plan
    except JobDirError:
        return []
    if plan is None:
        return []
    instances = [i for u in plan.units for i in u.instances]
    ordered = [u.name for u in plan.units]
    ordered += [i.worker for i in instances if i.worker is not None]
    ordered += [i.step for i in instances]
    return [n for n in dict.fromkeys(ordered) if n.startswith(prefix)]


def complete_kind(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a service kind's name (every installed plugin's)."""
    from click.shell_completion import CompletionItem

    from srt_services.app import compose

    try:
        names = sorted(compose.setup().plugins.kinds())
    except Exception:
        return []  # a broken plugin set completes nothing rather than a traceback
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_unit(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of SERVICE from the job directory given before it."""
    from click.shell_completion import CompletionItem

    job_dir = ctx.params.get("job_dir")
    return [CompletionItem(n) for n in unit_names(job_dir, incomplete)]
