"""Recipe commands: validate, dry-run, schema, kinds, migrate. No process is started here."""

from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

import rich_click as click

from srt_services.cli.job_args import complete_kind

if TYPE_CHECKING:
    from srt_services.recipe.problems import LocatedProblem


def _setup() -> Any:
    from srt_services.app import compose

    return compose.setup()


def _plugins() -> Any:
    return _setup().plugins


def _nodelist(nodes: int | None, nodelist: str | None) -> tuple[str, ...] | None:
    if nodes is not None and nodelist is not None:
        raise click.UsageError("give --nodes or --nodelist, not both")
    names = tuple(n.strip() for n in nodelist.split(",") if n.strip()) if nodelist else None
    if names is not None:
        from srt_services.names import name_problem

        for n in names:
            problem = name_problem(n)
            if problem:
                raise click.UsageError(f"--nodelist: node name {problem}")
    return names


@click.command()
@click.argument("recipes", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="`json`: one report per recipe on stdout, for tools. `github`: workflow commands"
    " that annotate the recipe's lines in a GitHub Actions run.",
)
@click.option(
    "--variant",
    metavar="SELECTOR",
    help="In another tool's sweep file (srtctl's override_*/zip_override_*), check these"
    " variants (srtctl's selectors: base, override_X, zip_override_G, zip_override_G[i], a"
    " glob); default: every variant that tool would submit.",
)
def validate(recipes: tuple[str, ...], quiet: bool, fmt: str, variant: str | None) -> None:
    """Check recipes without running anything; every problem is reported with its line.

    The verdict is `srt dry-run`'s: each recipe is also planned on the smallest symbolic
    allocation that fits it, so two services on one port of a node, or a placement that
    selects no nodes, fail here too. Nothing is started and no network is used. `-` reads
    a recipe (YAML or JSON) from standard input. An srtctl recipe (with srt-srtctl) is read
    as it is; each of its variants is checked. Exit status 2 when any recipe is invalid.
    """
    where = _setup()
    reports = [
        report for given in recipes for report in _validate_one(given, where, fmt, quiet, variant)
    ]
    if fmt == "json":
        import json

        click.echo(json.dumps(reports, indent=2))
    elif fmt == "github":
        for report in reports:
            for p in report["problems"]:
                click.echo(_github_annotation(report["recipe"], p))
    if not all(report["valid"] for report in reports):
        raise SystemExit(2)


def _validate_one(
    given: str, where: Any, fmt: str, quiet: bool, variant: str | None
) -> list[dict[str, Any]]:
    """The verdict on one recipe file as its reports (one per job: a sweep file has
    several); in the text format its problems or warnings, and its "ok" lines, are written
    at once, so a long list shows progress."""
    from srt_services.app.validate import ValidateRequest, verdicts
    from srt_services.errors import RecipeInvalid
    from srt_services.recipe.problems import LocatedProblem, RecipeError
    from srt_services.recipe.reading import source_name

    path = source_name(given)
    try:
        planned_jobs = verdicts(where, ValidateRequest(given, variant))
    except RecipeInvalid as exc:
        if fmt == "text":
            sys.stderr.write(f"{exc}\n")
        problems = exc.problems if isinstance(exc, RecipeError) else [LocatedProblem("", str(exc))]
        return [_report(path, None, problems)]
    reports = []
    for planned in planned_jobs:
        loaded = planned.loaded
        selector = loaded.variant.selector if loaded.variant is not None else None
        shown = f"{path} [{selector}]" if len(planned_jobs) > 1 and selector else path
        # what planning says without failing (an implied service that selects no nodes)
        warnings = [
            *loaded.warnings,
            *(LocatedProblem("", w, warning=True) for w in planned.plan.warnings),
        ]
        if fmt == "text":
            for w in warnings:
                sys.stderr.write("warning: " + w.render(shown) + "\n")
            if not quiet:
                click.echo(f"{shown}: ok ({len(loaded.services)} service(s))")
        report = _report(path, len(loaded.services), warnings)
        if selector is not None:
            report["variant"] = selector
        reports.append(report)
    return reports


def _report(path: str, services: int | None, problems: list[LocatedProblem]) -> dict[str, Any]:
    return {
        "recipe": path,
        "valid": services is not None,
        "services": services,
        "problems": [
            {
                "severity": "warning" if p.warning else "error",
                "line": p.line,
                "column": p.column,
                "field": p.label or None,
                "message": p.message,
            }
            for p in problems
        ],
    }


def _github_annotation(path: str, problem: dict[str, Any]) -> str:
    """One ``::error``/``::warning`` workflow command, escaped as the runner expects."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    where = [f"file={prop(path)}"]
    if problem["line"] is not None:
        where += [f"line={problem['line']}", f"col={problem['column'] or 1}"]
    text = f"{problem['field']}: {problem['message']}" if problem["field"] else problem["message"]
    return f"::{problem['severity']} {','.join(where)},title=srt validate::{data(text)}"


@click.command("dry-run")
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--nodes", type=click.IntRange(1, 100_000), help="Plan for N symbolic nodes.")
@click.option("--nodelist", help="Plan for these node names (comma-separated).")
@click.option("--local", is_flag=True, help="Use the addresses `srt run` would (127.0.0.x).")
@click.option("--json", "as_json", is_flag=True, help="Write the plan as JSON.")
@click.option(
    "--unit",
    "units",
    multiple=True,
    metavar="NAME",
    help="Show only this unit (a service, a role's workers, the frontend or the benchmark);"
    " repeatable. For the text output; filter --json with jq.",
)
@click.option(
    "--srun",
    "show_srun",
    is_flag=True,
    help="Also print the srun line of every instance (Slurm launcher).",
)
@click.option(
    "--variant",
    metavar="SELECTOR",
    help="In another tool's sweep file, plan these variants (srtctl's selectors); default:"
    " every variant that tool would submit.",
)
def dry_run(
    recipe: str,
    nodes: int | None,
    nodelist: str | None,
    local: bool,
    as_json: bool,
    units: tuple[str, ...],
    show_srun: bool,
    variant: str | None,
) -> None:
    """Show exactly what `srt run` would do: nodes, phases, argv, effective env, probes.

    Nothing is started and no network is used. Without --nodes, the plan uses as many
    symbolic nodes as the recipe needs. `-` reads the recipe from standard input.
    """
    from srt_services.app.dry_run import DryRunRequest, dry_run

    if units and as_json:
        raise click.UsageError("--unit filters the text output; filter --json with jq")
    request = DryRunRequest(
        recipe,
        nodes=nodes,
        nodelist=_nodelist(nodes, nodelist),
        local=local,
        srun_lines=show_srun,
        variant=variant,
    )
    from srt_services.app import compose

    # paused to the last byte written: a collection over the whole plan once the pause
    # ended would cost more than writing it
    with compose.collector_paused():
        _show_dry_run(dry_run(_setup(), request), units, as_json)


def _show_dry_run(result: Any, units: tuple[str, ...], as_json: bool) -> None:
    if result.variants and as_json:
        _variants_json(result.variants)
        return
    if result.variants:
        for planned in result.variants:
            selector = planned.loaded.variant.selector if planned.loaded.variant else ""
            sys.stdout.write(f"=== variant {planned.plan.job_name} ({selector})\n")
            _show_plan(planned, result, units)
        return
    if as_json:
        sys.stdout.buffer.write(result.planned.plan.to_json(indent=False))
        return
    _show_plan(result.planned, result, units)


def _variants_json(variants: list[Any]) -> None:
    """``{"variants": [{"variant", "selector", "plan"}]}``: one document for a sweep file."""
    import orjson

    out = []
    for planned in variants:
        variant = planned.loaded.variant
        out.append(
            {
                "variant": variant.name if variant is not None else planned.plan.job_name,
                "selector": variant.selector if variant is not None else None,
                "plan": orjson.Fragment(planned.plan.to_json()),
            }
        )
    sys.stdout.buffer.write(orjson.dumps({"variants": out}, option=orjson.OPT_APPEND_NEWLINE))


def _show_plan(planned: Any, result: Any, units: tuple[str, ...]) -> None:
    loaded, plan = planned.loaded, planned.plan
    only = _known_units(plan, units) if units else None
    from srt_services.plan.text import render_plan

    for w in loaded.warnings:
        sys.stderr.write("warning: " + w.render(loaded.source) + "\n")
    for note in loaded.notes:
        sys.stderr.write(f"note: {note}\n")
    sys.stdout.write(render_plan(plan, only, result.container_aliases))
    if result.srun and planned is result.planned:
        import shlex

        sys.stdout.write("srun lines (job <job_id>):\n")
        for line in result.srun:
            if only is not None and line.unit not in only and line.unit:
                continue
            shown = f"(via {line.via})" if line.via else shlex.join(line.argv)
            sys.stdout.write(f"  {line.step}: {shown}\n")


def _known_units(plan: Any, names: tuple[str, ...]) -> frozenset[str]:
    from difflib import get_close_matches

    known = [u.name for u in plan.units]
    for name in names:
        if name not in known:
            close = get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise click.UsageError(
                f"--unit {name}: the plan has no unit of that name{hint}"
                f" (units: {', '.join(known) or 'none'})"
            )
    return frozenset(names)


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file.")
def schema(output: str | None) -> None:
    """Write the recipe JSON Schema (with the installed kinds and probes) for editors."""
    import json

    from srt_services.checking.schema import recipe_schema

    text = json.dumps(recipe_schema(_plugins()), indent=2, sort_keys=True) + "\n"
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


@click.command()
@click.argument("name", required=False, shell_complete=complete_kind)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def kinds(name: str | None, as_json: bool) -> None:
    """List the service kinds with their defaults and the plugin that provides each.

    With NAME: that kind in full, with every option's type, default and description.
    On a terminal the table fits its width; in a pipe every column is printed in full.
    """
    import json

    from srt_services.cli.kind_views import kind_text, kinds_table
    from srt_services.cli.tables import terminal_width
    from srt_services.plugins.kind_table import kind_detail, kind_rows

    plugins = _plugins()
    if name is not None:
        from srt_services.errors import PluginError

        plugins.kinds()  # every plugin loaded, so an unknown name lists every known one
        try:
            detail = kind_detail(plugins, name)
        except PluginError as exc:
            raise click.UsageError(str(exc)) from None
        if as_json:
            click.echo(json.dumps(detail, indent=2))
        else:
            sys.stdout.write(kind_text(detail, terminal_width()))
        return
    rows = kind_rows(plugins)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    sys.stdout.write(kinds_table(rows, terminal_width()))


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result here.")
@click.option("--in-place", is_flag=True, help="Rewrite each file (a .v1 backup is kept).")
@click.option(
    "--verify",
    is_flag=True,
    help="Write only results that load with the installed plugins (the others are reported).",
)
@click.option(
    "--from",
    "source_format",
    metavar="FORMAT",
    help="Translate another tool's recipe (`srtctl`, with srt-srtctl) into the equivalent"
    " schema-2 recipe instead; comments are carried to the keys they describe. A sweep file"
    " gives one recipe per variant: -o names a directory then.",
)
@click.option("--variant", metavar="SELECTOR", help="With --from: only these variants.")
def migrate(
    paths: tuple[str, ...],
    output: str | None,
    in_place: bool,
    verify: bool,
    source_format: str | None,
    variant: str | None,
) -> None:
    """Rewrite v1 recipes (`infra:`, `backend.mooncake_kv_store`) as schema 2 services.

    Comments, key order and quoting are kept. A directory stands for its *.yaml and *.yml
    files, recursively. One recipe is printed unless -o or --in-place is given; several
    need --in-place. Every result is loaded with the installed plugins: one that does not
    load is reported (and, with --verify, not written). A recipe that cannot be migrated or
    whose result does not load makes the exit status 2; the others go on.
    """
    if output and in_place:
        raise click.UsageError("give either --output or --in-place")
    if source_format is not None:
        _translate(paths, source_format, variant, output, in_place)
        return
    if variant is not None:
        raise click.UsageError("--variant goes with --from")
    files = _recipe_files(paths)
    if len(files) > 1 and not in_place:
        raise click.UsageError(f"{len(files)} recipes: rewrite them with --in-place")
    where = _setup()
    outcomes = Counter(
        _migrate_one(recipe, where, output, in_place=in_place, verify=verify) for recipe in files
    )
    failed, unchanged, invalid = outcomes[_NOT_MIGRATED], outcomes[_UNCHANGED], outcomes[_INVALID]
    if len(files) > 1:
        done = len(files) - failed - unchanged
        loads = f" ({invalid} of them do not load)" if invalid else ""
        sys.stderr.write(
            f"{done} migrated{loads}, {unchanged} already schema 2, {failed} not migrated\n"
        )
    if failed or invalid:
        raise SystemExit(2)


def _translate(
    paths: tuple[str, ...],
    source_format: str,
    variant: str | None,
    output: str | None,
    in_place: bool,
) -> None:
    """``srt migrate --from FORMAT``: each recipe's jobs as schema-2 recipes."""
    import os

    from srt_services.app.migrate import TranslateRequest, translate

    if in_place:
        raise click.UsageError("--in-place rewrites v1 recipes; with --from, use -o")
    if len(paths) != 1:
        raise click.UsageError("--from translates one recipe file at a time")
    results = translate(_setup(), TranslateRequest(paths[0], source_format, variant))
    for result in results:
        for note in result.notes:
            sys.stderr.write(f"{paths[0]}: note: {note}\n")
    if len(results) == 1 and not (output and os.path.isdir(output)):
        if output:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(results[0].text)
        else:
            sys.stdout.write(results[0].text)
        return
    if not output:
        raise click.UsageError(
            f"{paths[0]} holds {len(results)} jobs: give -o DIRECTORY for one file per job"
        )
    os.makedirs(output, exist_ok=True)
    for result in results:
        target = os.path.join(output, f"{result.name}.yaml")
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(result.text)
        sys.stderr.write(f"{result.selector or result.name} -> {target}\n")


#: what became of one recipe in ``srt migrate``
_MIGRATED, _INVALID, _UNCHANGED, _NOT_MIGRATED = "migrated", "invalid", "unchanged", "failed"


def _migrate_one(
    recipe: str, where: Any, output: str | None, *, in_place: bool, verify: bool
) -> str:
    """Migrate one recipe, say what was done on stderr and write the result where asked;
    returns the outcome (``_MIGRATED``, ...) the summary counts."""
    from srt_services.errors import RecipeInvalid
    from srt_services.recipe.migrate import UNCHANGED, migrate_file

    try:
        text, notes = migrate_file(recipe)
    except RecipeInvalid as exc:
        sys.stderr.write(f"{exc}\n{recipe}: not migrated\n")
        return _NOT_MIGRATED
    same = notes == [UNCHANGED]
    # a migration that yields a recipe srt refuses has not done its job, --verify or not
    refused = None if same else _load_problem(recipe, text, where)
    if refused is not None and verify:
        sys.stderr.write(f"{refused}\n{recipe}: not migrated\n")
        return _NOT_MIGRATED
    for note in notes:
        sys.stderr.write(f"{recipe}: {note}\n")
    if refused is not None:
        sys.stderr.write(f"{refused}\n")
    if not (same and in_place):  # an unchanged file is not rewritten: no rewrite, no backup
        _write_migrated(recipe, text, output, in_place)
    if same:
        return _UNCHANGED
    return _MIGRATED if refused is None else _INVALID


def _write_migrated(recipe: str, text: str, output: str | None, in_place: bool) -> None:
    """Over the recipe itself (its v1 text kept as ``<recipe>.v1``), to ``output``, or
    to stdout."""
    if in_place:
        import shutil

        shutil.copyfile(recipe, recipe + ".v1")
        with open(recipe, "w", encoding="utf-8") as fh:
            fh.write(text)
    elif output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def _load_problem(recipe: str, text: str, where: Any) -> str | None:
    """Why the migrated ``text`` of ``recipe`` does not load, or ``None`` when it does."""
    from srt_services.app import compose
    from srt_services.errors import RecipeInvalid

    try:
        compose.load(where, recipe, text=text)
    except RecipeInvalid as exc:
        return (
            f"{recipe}: the migrated recipe does not load (lines are the migrated text's;"
            f" see it with `srt migrate {recipe}`):\n{exc}"
        )
    return None


def _recipe_files(paths: tuple[str, ...]) -> list[str]:
    """The files named, with each directory replaced by its *.yaml and *.yml files."""
    from pathlib import Path

    files: list[str] = []
    for given in paths:
        if Path(given).is_dir():
            found = sorted(p for p in Path(given).rglob("*") if p.suffix in (".yaml", ".yml"))
            files.extend(str(p) for p in found if p.is_file())
        else:
            files.append(given)
    if not files:
        raise click.UsageError("no *.yaml or *.yml file in " + ", ".join(paths))
    return files
