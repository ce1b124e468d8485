"""Shell text srtctl runs before a worker or frontend command (doc §5 "Bash line")."""

from __future__ import annotations

import shlex

from srt_srtctl.context import BuildContext


def setup_script_command(name: str) -> str:
    """Runs /configs/<name>, else /configs/patches/<name>; only warns when neither exists."""
    return (
        f"setup_script={shlex.quote(name)} && "
        'script_path="/configs/${setup_script}" && '
        'patch_script_path="/configs/patches/${setup_script}" && '
        'echo "Running setup script: ${script_path} (fallback ${patch_script_path})" && '
        'if [ -f "${script_path}" ]; then bash "${script_path}"; '
        'elif [ -f "${patch_script_path}" ]; then bash "${patch_script_path}"; '
        'else echo "WARNING: ${script_path} or ${patch_script_path} not found"; fi'
    )


def join_preamble(parts: list[str | None]) -> str | None:
    kept = [p for p in parts if p]
    return " && ".join(kept) if kept else None


def worker_preamble(ctx: BuildContext, mode: str, index: int) -> str | None:
    short = "agg" if mode == "aggregated" else mode
    return join_preamble(
        [
            ctx.cluster.default_bash_preamble,
            setup_script_command(ctx.config.setup_script) if ctx.config.setup_script else None,
            ctx.values.dynamo_install if ctx.installs_dynamo else None,
            f"( {ctx.values.fingerprint_capture(f'/logs/fingerprint_{short}_w{index}.json')} )",
        ]
    )


def frontend_preamble(ctx: BuildContext) -> str | None:
    return join_preamble(
        [
            ctx.cluster.default_bash_preamble,
            setup_script_command(ctx.config.setup_script) if ctx.config.setup_script else None,
            ctx.values.dynamo_install if ctx.installs_dynamo else None,
        ]
    )
