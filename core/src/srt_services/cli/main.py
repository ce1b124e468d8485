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
from typing import TYPE_CHECKING

import rich_click as click

from srt_services import __version__

if TYPE_CHECKING:
    import logging

    from srt_services.errors import SrtError

#: ``srt -v``: tracebacks behind errors, log messages, plugin tracing.
VERBOSE = False

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
    "logs": ("srt_services.cli.log_cmds", "logs"),
    "events": ("srt_services.cli.event_cmds", "events"),
    "report": ("srt_services.cli.report_cmds", "report"),
    "restart": ("srt_services.cli.control_cmds", "restart"),
    "exec": ("srt_services.cli.exec_cmds", "exec_"),
    "rm": ("srt_services.cli.clean_cmds", "rm"),
    "prune": ("srt_services.cli.clean_cmds", "prune"),
    "ps": ("srt_services.cli.job_cmds", "ps"),
    "jobs": ("srt_services.cli.job_cmds", "jobs"),
    "apply": ("srt_services.cli.slurm_cmds", "apply"),
    "render": ("srt_services.cli.slurm_cmds", "render"),
    "plugins": ("srt_services.cli.plugin_cmds", "plugins"),
}

#: Commands of first-party plugins: a name here without its plugin says what to install.
PLUGIN_COMMANDS: dict[str, str] = {"metrics": "srt-exporters", "oarbank": "srt-oarbank"}

EPILOG = (
    "Exit codes: 0 success, 2 invalid recipe or usage, 1 any other failure (a failed job"
    " exits with its own status). Plugin commands such as `srt oarbank` load on first use;"
    " `srt plugins list` shows every installed plugin."
)


class SuggestingGroup(click.RichGroup):
    """A group whose "no such command" error suggests the closest names (``srt kindz``:
    did you mean kinds?). click suggests close option names but not command names."""

    def command_names(self, ctx: click.Context) -> list[str]:
        """Every name a user may mean (the listed ones, and for srt its plugin commands)."""
        return self.list_commands(ctx)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if ctx.resilient_parsing or name.startswith("-") or self.get_command(ctx, name):
            return super().resolve_command(ctx, args)
        dist = PLUGIN_COMMANDS.get(name)
        if dist is not None:
            from srt_services.plugins.hints import pip_command

            raise click.UsageError(
                f"`srt {name}` comes with the {dist} plugin, which is not installed or not"
                f" loaded: {pip_command(dist)} (`srt plugins list` shows why a plugin is not"
                " loaded)",
                ctx,
            )
        from difflib import get_close_matches

        close = get_close_matches(name, self.command_names(ctx), n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise click.UsageError(f"No such command {name!r}.{hint}", ctx)


class SrtGroup(SuggestingGroup):
    """Core commands by name, plugin commands on demand."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        if ctx.resilient_parsing:  # shell completion: the plugins' commands complete too
            return [*CORE_COMMANDS, *sorted(_plugin_commands())]
        return list(CORE_COMMANDS)

    def command_names(self, ctx: click.Context) -> list[str]:
        return [*CORE_COMMANDS, *_plugin_commands()]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = CORE_COMMANDS.get(cmd_name)
        if target is not None:
            command: click.Command = getattr(import_module(target[0]), target[1])
            return command
        found = _plugin_commands().get(cmd_name)
        return found[1] if found else None


def _plugin_commands() -> dict[str, tuple[str, click.Command]]:
    """The plugins' commands; a broken plugin costs its own commands, not the listing."""
    from srt_services.errors import SrtError
    from srt_services.plugins.manager import default_plugins

    try:
        return default_plugins().cli_commands()
    except SrtError as exc:
        sys.stderr.write(f"srt: {exc}\n")
        return {}


@click.group(cls=SrtGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="srt", message="%(prog)s %(version)s"
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Debugging detail: the traceback behind an error, srt's log messages, each plugin"
    " import and hook call with its duration (SRT_TRACE_PLUGINS=1).",
)
def cli(verbose: bool) -> None:
    """Launch and supervise the services of LLM-inference jobs, on this machine or in Slurm.

    A recipe (YAML) describes the job: engine workers, frontend, benchmark and the services
    around them (etcd, NATS, exporters, sidecars). `srt dry-run` shows the plan, `srt run`
    executes it here, `srt apply` submits it to Slurm.
    """
    if verbose:
        _set_verbose(True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: map srt's exceptions to exit codes and one-line messages."""
    _ensure_stdio()
    code = _run(argv)
    _quiet_stdio()
    _ignore_late_hangup()
    sys.exit(code)


def _ignore_late_hangup() -> None:
    """``srt run`` survives a hung-up terminal with a SIGHUP handler; the interpreter puts
    the default action (death) back while it shuts down, so a hang-up in that last moment
    would still change the exit status. Nothing is started any more: ignore it now."""
    import signal

    if callable(signal.getsignal(signal.SIGHUP)):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _run(argv: list[str] | None) -> int:
    try:
        return _dispatch(argv)
    finally:
        _set_verbose(False)


def _dispatch(argv: list[str] | None) -> int:
    from click.exceptions import Abort, Exit

    from srt_services.errors import SrtError

    try:
        cli.main(args=argv, prog_name="srt", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exit as exc:
        return int(exc.exit_code or 0)
    except click.ClickException as exc:
        return _click_error(exc)
    except Abort:
        _say("aborted\n")
        return 130
    except SrtError as exc:
        return _srt_error(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except PermissionError as exc:  # a user who may not act: a refusal, not a traceback
        _traceback(exc)
        _say(f"srt: refused: {exc.strerror}{f': {exc.filename}' if exc.filename else ''}\n")
        return 1
    return 0


def _click_error(exc: click.ClickException) -> int:
    """A usage error as plain lines (see :func:`usage_error_text`), any other click error
    as click words it; the exit code is click's."""
    if isinstance(exc, click.UsageError):
        _say(usage_error_text(exc))
    else:
        _say(f"Error: {exc.format_message()}\n")
    return int(exc.exit_code)


def _srt_error(exc: SrtError) -> int:
    """An invalid recipe exits 2 with its problems as they are (each already names its
    recipe and line); a failed job with the job's own code; any other srt error 1."""
    from srt_services.errors import JobFailed, RecipeInvalid

    _traceback(exc)
    if isinstance(exc, RecipeInvalid):
        _say(f"{exc}\n")
        return 2
    _say(f"srt: {exc}\n")
    return exc.exit_code if isinstance(exc, JobFailed) else 1


def _say(text: str) -> None:
    """An error message on stderr; a closed or hung-up terminal must not turn it into a
    traceback (the exit code says what happened)."""
    try:
        sys.stderr.write(text)
    except (OSError, ValueError):
        pass


def usage_error_text(exc: click.UsageError) -> str:
    """A usage error as plain lines: the usage, where help is, the error.

    Plain text rather than rich-click's boxes, which pad every line to the terminal width
    and fold a long path across lines, so what a user (or a test) reads never depends on
    the terminal.
    """
    ctx = exc.ctx
    lines = []
    if ctx is not None:
        pieces = " ".join(ctx.command.collect_usage_pieces(ctx))
        lines.append(f"Usage: {ctx.command_path} {pieces}".rstrip())
        if ctx.command.get_help_option(ctx) is not None:
            lines.append(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.")
        lines.append("")
    lines.append(f"Error: {exc.format_message()}")
    return "\n".join(lines) + "\n"


_VERBOSE_HANDLER: logging.Handler | None = None


def _set_verbose(on: bool) -> None:
    """Switch ``srt -v`` on for this command, or off again once it is done (``main`` may
    run several times in one process: tests, embedding)."""
    global VERBOSE, _VERBOSE_HANDLER
    VERBOSE = on
    if on and _VERBOSE_HANDLER is None:
        import logging

        _VERBOSE_HANDLER = logging.StreamHandler(sys.stderr)
        _VERBOSE_HANDLER.setFormatter(logging.Formatter("srt: %(name)s: %(message)s"))
        logging.getLogger("srt").addHandler(_VERBOSE_HANDLER)
        logging.getLogger("srt").setLevel(logging.DEBUG)
    elif not on and _VERBOSE_HANDLER is not None:
        import logging

        logging.getLogger("srt").removeHandler(_VERBOSE_HANDLER)
        logging.getLogger("srt").setLevel(logging.NOTSET)
        _VERBOSE_HANDLER = None
    manager = sys.modules.get("srt_services.plugins.manager")
    if on or manager is not None:
        from srt_services.plugins.manager import trace_plugins

        trace_plugins(on)


def _traceback(exc: BaseException) -> None:
    """Under ``srt -v``, the traceback behind a one-line error (a plugin's bug, a hook's)."""
    if VERBOSE:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)


def _ensure_stdio() -> None:
    """Started with stdin, stdout or stderr closed (``srt run ... >&-``): put ``/dev/null``
    there. Python left ``sys.stdout`` as ``None`` (every print would raise), and the next
    file srt opens would land on the empty descriptor, where a child or a stray write would
    then go; a daemon does the same."""
    import os

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
            mode = "r" if fd == 0 else "w"
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="replace", closefd=False))  # noqa: SIM115
        except OSError:
            continue


def _quiet_stdio() -> None:
    """If stdout/stderr went away (a closed terminal or pipe), stop Python from failing its
    final flush: that would turn the job's exit status into 120."""
    import os

    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass
