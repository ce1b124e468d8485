"""Shared fixtures of the core tests.

Core's tests load and plan through the plugin-author kit (:mod:`srt_services.testing`),
which plans through the application layer with an explicit, empty site config: the same
path ``srt validate`` and ``srt dry-run`` take. Recipes are *text* shown as
``recipe.yaml``, so a test reads as the recipe it checks and asserts the ``line:col`` a user
would see. The plugin set has only the built-ins: installed plugins never change a core
test.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from srt_services.testing.kit import KitSettings

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SOURCE = "recipe.yaml"


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    """The kit's fixtures (``srt_plugins``, ``srt_load``, ``srt_plan``, ``srt_problems``,
    ``srt_problem``) with only the built-ins, on recipe text shown as ``recipe.yaml``."""
    return KitSettings(source=SOURCE)


@pytest.fixture
def srt_env(tmp_path: Path) -> dict[str, str]:
    """Environment for ``srt`` subprocesses: no installed plugin, no site config."""
    site = tmp_path / "site.toml"
    site.write_text("# empty site config: no requirements, no lock\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}
    env.update(
        SRT_DISABLE_PLUGIN_AUTOLOAD="1",
        SRT_PLUGINS="",
        SRT_SITE_CONFIG=str(site),
        COLUMNS="200",
        NO_COLOR="1",
    )
    return env


@pytest.fixture
def on_terminal() -> Callable[..., str]:
    """``on_terminal(columns, *args, env=None)``: what ``srt ARGS`` prints on a pseudo-terminal
    that many columns wide (COLUMNS unset, so the terminal's own size counts)."""

    def run(columns: int, *args: str, env: dict[str, str] | None = None) -> str:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        full = {k: v for k, v in (env or os.environ).items() if k not in ("COLUMNS", "LINES")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "srt_services", *args],
            stdout=slave,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=full,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        proc.wait(60)
        return b"".join(chunks).decode().replace("\r\n", "\n")

    return run


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the dev venv's)."""
    return sys.executable


@pytest.fixture
def repo() -> Path:
    """The repository root (examples/, docs/, bench/ are below it)."""
    return REPO


_GUARDED = ("SIGHUP", "SIGTERM", "SIGINT", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGUSR2")


@pytest.fixture(autouse=True)
def _signal_dispositions_restored() -> Iterator[None]:
    """Every test starts with the dispositions pytest had. Code run in this process (the
    CLI through ``kit.run_cli``, an orchestrator in-process) may ignore or catch signals;
    an ignored SIGHUP is inherited by every later child (``nohup``'s rule), so a later test
    of srt's hang-up handling saw a job that, rightly, kept ignoring it."""
    import signal

    saved = {name: signal.getsignal(getattr(signal, name)) for name in _GUARDED}
    yield
    for name, handler in saved.items():
        if handler is not None and signal.getsignal(getattr(signal, name)) is not handler:
            signal.signal(getattr(signal, name), handler)
