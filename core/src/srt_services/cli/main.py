"""``srt``: the command line. Thin commands over the load, plan, launch and supervise layers.

Start-up cost matters (``srt --help`` runs on login nodes over NFS), so this module imports
only rich-click. Each command lives in a small module that is imported when the command is
listed or run, and those modules import the heavy layers inside the command functions.
Plugin commands are found only when a name is not a core command, so ``--help`` never scans
entry points or imports a plugin.
"""

from __future__ import annotations

import sys
from importlib import import_module

import rich_click as click

from srt_services import __version__

#: name -> (module, attribute)
CORE_COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("srt_services.cli.recipe_cmds", "validate"),
    "dry-run": ("srt_services.cli.recipe_cmds", "dry_run"),
    "schema": ("srt_services.cli.recipe_cmds", "schema"),
    "kinds": ("srt_services.cli.recipe_cmds", "kinds"),
    "migrate": ("srt_services.cli.recipe_cmds", "migrate"),
    "run": ("srt_services.cli.job_cmds", "run"),
    "status": ("srt_services.cli.job_cmds", "status"),
    "stop": ("srt_services.cli.job_cmds", "stop"),
    "apply": ("srt_services.cli.slurm_cmds", "apply"),
    "render": ("srt_services.cli.slurm_cmds", "render"),
    "plugins": ("srt_services.cli.plugin_cmds", "plugins"),
}

EPILOG = (
    "Exit codes: 0 success, 2 invalid recipe or usage, 1 any other failure (a failed job"
    " exits with its own status). Plugin commands such as `srt oarbank` load on first use;"
    " `srt plugins list` shows every installed plugin."
)


class SrtGroup(click.RichGroup):
    """Core commands by name, plugin commands on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(CORE_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = CORE_COMMANDS.get(cmd_name)
        if target is not None:
            command: click.Command = getattr(import_module(target[0]), target[1])
            return command
        from srt_services.plugins.manager import default_plugins

        found = default_plugins().cli_commands().get(cmd_name)
        return found[1] if found else None


@click.group(cls=SrtGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="srt", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Launch and supervise the services of LLM-inference jobs, on this machine or in Slurm.

    A recipe (YAML) describes the job: engine workers, frontend, benchmark and the services
    around them (etcd, NATS, exporters, sidecars). `srt dry-run` shows the plan, `srt run`
    executes it here, `srt apply` submits it to Slurm.
    """


def main(argv: list[str] | None = None) -> None:
    """Entry point: map srt's exceptions to exit codes and one-line messages."""
    code = _run(argv)
    _quiet_stdio()
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    from click.exceptions import Abort, Exit

    from srt_services.errors import JobFailed, RecipeInvalid, SrtError

    try:
        cli.main(args=argv, prog_name="srt", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exit as exc:
        return int(exc.exit_code or 0)
    except click.ClickException as exc:
        exc.show()
        return int(exc.exit_code)
    except Abort:
        sys.stderr.write("aborted\n")
        return 130
    except RecipeInvalid as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    except JobFailed as exc:
        sys.stderr.write(f"srt: {exc}\n")
        return exc.exit_code
    except SrtError as exc:
        sys.stderr.write(f"srt: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0


def _quiet_stdio() -> None:
    """If stdout/stderr went away (a closed terminal or pipe), stop Python from failing its
    final flush: that would turn the job's exit status into 120."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass
