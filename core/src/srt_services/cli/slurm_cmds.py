"""Slurm commands: render the sbatch script, or stage and submit it."""

from __future__ import annotations

import json
import sys

import rich_click as click

from srt_services.cli.job_args import root_option


@click.command()
@click.argument("recipe", type=click.Path(exists=True, dir_okay=False))
@root_option
@click.option(
    "-o", "--output", "out_dir", type=click.Path(file_okay=False), help="Job directory to create."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON record (job id, directory, pinned sources).",
)
@click.option("--dry-run", is_flag=True, help="Stage, pin and render, but do not submit.")
@click.option(
    "--variant",
    metavar="SELECTOR",
    help="In another tool's sweep file, submit these variants, one job each (srtctl's"
    " selectors); default: every variant that tool would submit.",
)
def apply(
    recipe: str, out_dir: str | None, as_json: bool, dry_run: bool, variant: str | None
) -> None:
    """Submit a recipe to Slurm: stage it, pin every source rev to a commit, render the sbatch
    script and submit it. Prints the job id and the job directory.

    A sweep file (srtctl's override_*/zip_override_* variants) is one job per variant, each
    staged in its own directory (under -o when given). A rev that names a branch, or that
    `git ls-remote` cannot find, is refused (exit 2) before anything is written."""
    from srt_services.app import compose
    from srt_services.app.apply import ApplyRequest, apply

    # a rev that cannot be pinned is refused before anything is written
    request = ApplyRequest(recipe, out_dir, pin=True, submit=not dry_run, variant=variant)
    subs = apply(compose.setup(), request)
    if as_json:
        docs = [sub.as_dict() for sub in subs]
        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs))
        return
    for sub in subs:
        for p in sub.pins:
            if p.sha:
                sys.stderr.write(f"{p.path}: {p.rev} -> {p.sha}\n")
        if dry_run:
            click.echo(f"rendered {sub.script} (not submitted); job directory {sub.job_dir}")
        else:
            click.echo(f"submitted job {sub.job_id}; job directory {sub.job_dir}")


@click.command()
@click.argument("recipe", type=click.Path(exists=True, dir_okay=False))
@root_option
@click.option(
    "-o", "--output", "out_dir", type=click.Path(file_okay=False), help="Job directory to create."
)
def render(recipe: str, out_dir: str | None) -> None:
    """Write the sbatch script and the staged recipe without submitting (no network: sources
    are not pinned; `srt apply` pins them)."""
    from srt_services.app import compose
    from srt_services.app.apply import ApplyRequest, apply

    for sub in apply(compose.setup(), ApplyRequest(recipe, out_dir, pin=False, submit=False)):
        click.echo(sub.script)
