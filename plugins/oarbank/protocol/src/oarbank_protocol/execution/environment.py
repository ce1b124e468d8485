"""The exact environment and files a protocol executable gets, and nothing inherited.

Nothing from the agent's own environment leaks through: a module must not see the job's
``SLURM_*``, ``ETCD_*``, ``NATS_*`` or ``DYN_*`` variables, nor an ``LD_PRELOAD`` (go-plugin's
``SkipHostEnv``, fault matrix V04). Settings, granted tools and limits travel as UTF-8 JSON
files because environment size limits differ per OS.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from oarbank_protocol.execution.sandbox import Confinement
from oarbank_protocol.names import check_name
from oarbank_protocol.platforms import current_platform

SAFE_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_LANG: Final = "C.UTF-8"

_ENV_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_NAMES: Final = frozenset({"PATH", "HOME", "TMPDIR", "LANG"})
_LOADER_PREFIXES: Final = ("LD_", "DYLD_", "PYTHON", "PERL5", "RUBYOPT", "NODE_OPTIONS")


def check_extra_env(extra: Mapping[str, str], *, allow_loader_vars: bool = False) -> None:
    """Refuse names that are malformed, ours to set, or change how programs load code."""
    for name, value in extra.items():
        if not _ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"environment variable name {name!r} is not valid")
        if name in _RESERVED_NAMES or name.startswith("OARBANK_"):
            raise ValueError(f"environment variable {name} is set by the agent, not configurable")
        if not allow_loader_vars and name.upper().startswith(_LOADER_PREFIXES):
            raise ValueError(f"environment variable {name} changes how code is loaded; refused")
        if "\x00" in value:
            raise ValueError(f"environment variable {name} contains NUL")


@dataclass(frozen=True)
class ExecContext:
    """Everything about *where* a module's executables run on this node.

    One context serves all services and probes of a module; ``OARBANK_SERVICE`` is filled in
    per executable.
    """

    bundle_root: Path
    module: str
    node_id: str
    data_dir: Path
    platform: str = field(default_factory=current_platform)
    settings: Mapping[str, Any] = field(default_factory=dict)
    tools: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)
    path: str = SAFE_PATH
    lang: str = DEFAULT_LANG
    extra_env: Mapping[str, str] = field(default_factory=dict)
    allow_loader_vars: bool = False
    secret_keys: frozenset[str] = frozenset()
    secret_values: frozenset[str] = frozenset()
    write_files: bool = True
    """False for a reader that shares an agent's data directory (srt's readiness probe): the
    settings, tools and limits files are the agent's, and a second writer with less to say
    (no tools, no limits) must not replace them under the module's feet."""
    confinement: Confinement | None = None
    """The module's sandbox; None runs its executables unconfined."""
    broker_socket: Path | None = None
    """The agent's container broker for this module (``OARBANK_BROKER_SOCKET``), when its
    manifest declares containers."""

    def __post_init__(self) -> None:
        check_name(self.module, "module name")
        check_name(self.node_id, "node id")
        check_extra_env(self.extra_env, allow_loader_vars=self.allow_loader_vars)

    @property
    def home(self) -> Path:
        return self.data_dir / "home"

    @property
    def tmpdir(self) -> Path:
        return self.data_dir / "tmp"

    @property
    def files_dir(self) -> Path:
        return self.data_dir / ".oarbank"

    @property
    def settings_file(self) -> Path:
        return self.files_dir / "settings.json"

    @property
    def tools_file(self) -> Path:
        return self.files_dir / "tools.json"

    @property
    def limits_file(self) -> Path:
        return self.files_dir / "limits.json"


def write_json_atomic(path: Path, value: Any, *, mode: int = 0o600) -> None:
    """Write-then-rename so a concurrent reader sees the old file or the new one, never half."""
    data = json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8") + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def prepare_files(context: ExecContext) -> None:
    """Create the data, home and temp directories and write the three JSON files."""
    for directory in (context.data_dir, context.home, context.tmpdir, context.files_dir):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not context.write_files:
        return
    write_json_atomic(context.settings_file, dict(context.settings))
    write_json_atomic(context.tools_file, dict(context.tools))
    write_json_atomic(context.limits_file, dict(context.limits))


def build_env(context: ExecContext, service: str) -> dict[str, str]:
    """The complete environment for one executable: the spec's list plus configured extras."""
    env = dict(context.extra_env)
    env.update(
        {
            "PATH": context.path,
            "LANG": context.lang,
            "HOME": str(context.home),
            "TMPDIR": str(context.tmpdir),
            "OARBANK_MODULE_DATA": str(context.data_dir),
            "OARBANK_MODULE": context.module,
            "OARBANK_SERVICE": service,
            "OARBANK_NODE_ID": context.node_id,
            "OARBANK_PLATFORM": context.platform,
            "OARBANK_SETTINGS_FILE": str(context.settings_file),
            "OARBANK_TOOLS_FILE": str(context.tools_file),
            "OARBANK_LIMITS_FILE": str(context.limits_file),
        }
    )
    if context.broker_socket is not None:
        env["OARBANK_BROKER_SOCKET"] = str(context.broker_socket)
    return env


def load_json_file(path: Path, what: str) -> dict[str, Any]:
    """Read a settings/tools/limits file given to the agent: a UTF-8 JSON object or an error."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} file {path} is not UTF-8 JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} file {path} must hold a JSON object")
    return value
