"""The site configuration a cluster admin writes (``SRT_SITE_CONFIG``, ``/etc/srt/site.toml``).

One TOML file for what is a property of the cluster rather than of a recipe: which plugins
may load, Slurm defaults, container aliases, where binaries live. Every table is optional.
Unknown keys are errors, so a typo in an admin's pin is noticed rather than ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from srt_services.errors import SrtError

DEFAULT_PATH = "/etc/srt/site.toml"
#: The largest site config read (an admin's file is a few KB).
MAX_SIZE = 1 << 20
#: Node-local storage when neither the site nor the job names any.
DEFAULT_NODE_LOCAL = "/tmp"


class SiteConfigError(SrtError):
    pass


@dataclass(frozen=True, slots=True)
class PluginPolicy:
    require: tuple[str, ...] = ()
    allow: tuple[str, ...] | None = None
    block: tuple[str, ...] = ()
    lock: str | None = None
    strict: bool = False
    #: ``false``: load only the plugins ``SRT_PLUGINS`` names (the site-wide
    #: ``SRT_DISABLE_PLUGIN_AUTOLOAD=1``); allow, block, pins and the lock still apply.
    autoload: bool = True


@dataclass(frozen=True, slots=True)
class SlurmDefaults:
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    sbatch_extra: tuple[str, ...] = ()
    srun_extra: tuple[str, ...] = ()
    gpus_per_node: int | None = None
    #: Interface whose IPv4 address is a node's ``{node_ip}`` (default: ``hostname -I``'s first).
    network_interface: str | None = None
    #: How a Slurm job starts its instances when its recipe does not say (``steps`` or
    #: ``agents``); ``None``: agents above ``agents_above_nodes`` nodes, steps up to it.
    launcher: str | None = None
    agents_above_nodes: int = 8
    #: How long every node's agent may take to start; how long one may stay silent before
    #: its node counts as lost (and, on the node, before the orchestrator does).
    agent_start_timeout: float = 60.0
    agent_lost_after: float = 10.0


@dataclass(frozen=True, slots=True)
class SiteConfig:
    path: str | None = None
    plugins: PluginPolicy = field(default_factory=PluginPolicy)
    slurm: SlurmDefaults = field(default_factory=SlurmDefaults)
    container_aliases: dict[str, str] = field(default_factory=dict)
    container_mounts: tuple[str, ...] = ()
    binaries: dict[str, str] = field(default_factory=dict)
    env_passthrough: tuple[str, ...] = ()
    #: The least readiness budget a probe gets when the recipe does not give its own: on a
    #: cluster where a cold container image takes minutes to import, the 120 s default (or
    #: a kind's) fails jobs that would have come up.
    readiness_timeout: float | None = None
    #: Root of node-local storage on the compute nodes (``{local_dir}`` lives under it):
    #: state the discovery plane fsyncs must not sit on NFS or Lustre. ``None`` (not set):
    #: ``$SLURM_TMPDIR`` where the job has one, else ``/tmp`` (see :func:`node_local_root`).
    node_local: str | None = None
    #: ``[formats.<name>]``: settings handed to a recipe-format plugin (srt-srtctl's
    #: ``cluster_config``, the srtslurm.yaml to read), checked by the plugin
    formats: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``[local] network``: how ``srt run``'s virtual nodes are networked on this machine
    #: (``auto``, ``shared`` or ``namespaces``; ``srt run --local-network`` overrides it)
    local_network: str = "auto"


#: The values of ``[local] network`` (and ``srt run --local-network``).
LOCAL_NETWORK_MODES: tuple[str, ...] = ("auto", "shared", "namespaces")

_TABLES: dict[str, set[str]] = {
    "plugins": {"require", "allow", "block", "lock", "strict", "autoload"},
    "slurm": {
        "partition",
        "account",
        "time",
        "sbatch_extra",
        "srun_extra",
        "gpus_per_node",
        "network_interface",
        "launcher",
        "agents_above_nodes",
        "agent_start_timeout_seconds",
        "agent_lost_after_seconds",
    },
    "containers": {"aliases", "mounts"},
    "binaries": None,  # type: ignore[dict-item]  # free-form name -> path
    "formats": None,  # type: ignore[dict-item]  # a recipe format's settings, by format name
    "env": {"passthrough"},
    "readiness": {"timeout_seconds"},
    "storage": {"node_local"},
    "local": {"network"},
}


def _str_list(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SiteConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _requirements(where: str, value: Any) -> tuple[str, ...]:
    """PEP 508 requirements, checked here so that a typo in a pin is an error at once
    rather than a rule that silently never matches."""
    items = _str_list(where, value)
    if not items:
        return items  # the requirement grammar is imported for pins only
    from packaging.requirements import InvalidRequirement, Requirement

    for item in items:
        try:
            Requirement(item)
        except InvalidRequirement as exc:
            raise SiteConfigError(f"{where}: {item!r} is not a requirement: {exc}") from None
    return items


def _opt_str(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SiteConfigError(f"{where} must be a string")
    return value


def parse(data: dict[str, Any], path: str | None) -> SiteConfig:
    where = path or "site config"
    _check_tables(data, where)
    policy = _plugin_policy(data.get("plugins", {}), where, path)
    slurm = _slurm_defaults(data.get("slurm", {}), where)
    c = data.get("containers", {})
    aliases = c.get("aliases", {})
    if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
        raise SiteConfigError(f"{where}: containers.aliases must map names to image strings")
    binaries = data.get("binaries", {})
    if not all(isinstance(v, str) for v in binaries.values()):
        raise SiteConfigError(f"{where}: [binaries] values must be paths")
    formats = data.get("formats", {})
    for name, table in formats.items():
        if not isinstance(table, dict):
            raise SiteConfigError(f"{where}: [formats.{name}] must be a table")
    env = data.get("env", {})
    timeout = _readiness_timeout(data.get("readiness", {}).get("timeout_seconds"), where)
    node_local = _opt_str(f"{where}: storage.node_local", data.get("storage", {}).get("node_local"))
    if node_local is not None and not os.path.isabs(node_local):
        raise SiteConfigError(f"{where}: storage.node_local must be an absolute path")
    network = data.get("local", {}).get("network", "auto")
    if network not in LOCAL_NETWORK_MODES:
        raise SiteConfigError(
            f"{where}: local.network must be one of {', '.join(LOCAL_NETWORK_MODES)}"
        )
    return SiteConfig(
        path=path,
        plugins=policy,
        slurm=slurm,
        container_aliases=dict(aliases),
        container_mounts=_str_list(f"{where}: containers.mounts", c.get("mounts", [])),
        binaries=dict(binaries),
        env_passthrough=_str_list(f"{where}: env.passthrough", env.get("passthrough", [])),
        readiness_timeout=timeout,
        node_local=(node_local.rstrip("/") or "/") if node_local else None,
        formats={name: dict(table) for name, table in formats.items()},
        local_network=network,
    )


def _check_tables(data: dict[str, Any], where: str) -> None:
    """Every table is one srt knows and holds only keys it knows (a typo is an error)."""
    for table, value in data.items():
        if table not in _TABLES:
            raise SiteConfigError(f"{where}: unknown table [{table}] (known: {', '.join(_TABLES)})")
        if not isinstance(value, dict):
            raise SiteConfigError(f"{where}: [{table}] must be a table")
        known = _TABLES[table]
        if known is None:
            continue
        for key in value:
            if key not in known:
                raise SiteConfigError(
                    f"{where}: unknown key {table}.{key} (known: {', '.join(sorted(known))})"
                )


def _plugin_policy(p: dict[str, Any], where: str, path: str | None) -> PluginPolicy:
    """``[plugins]``; a relative ``lock`` is relative to the site config's directory."""
    lock = _opt_str(f"{where}: plugins.lock", p.get("lock"))
    if lock and path and not os.path.isabs(lock):
        lock = str(Path(path).parent / lock)
    strict = p.get("strict", False)
    if not isinstance(strict, bool):
        raise SiteConfigError(f"{where}: plugins.strict must be true or false")
    autoload = p.get("autoload", True)
    if not isinstance(autoload, bool):
        raise SiteConfigError(f"{where}: plugins.autoload must be true or false")
    return PluginPolicy(
        require=_requirements(f"{where}: plugins.require", p.get("require", [])),
        allow=_str_list(f"{where}: plugins.allow", p["allow"]) if "allow" in p else None,
        block=_str_list(f"{where}: plugins.block", p.get("block", [])),
        lock=lock,
        strict=strict,
        autoload=autoload,
    )


#: ``[slurm] launcher``'s values.
SLURM_LAUNCHERS = ("steps", "agents")


def _slurm_defaults(s: dict[str, Any], where: str) -> SlurmDefaults:
    gpn = s.get("gpus_per_node")
    if gpn is not None and (isinstance(gpn, bool) or not isinstance(gpn, int) or gpn < 1):
        raise SiteConfigError(f"{where}: slurm.gpus_per_node must be a positive integer")
    launcher = _opt_str(f"{where}: slurm.launcher", s.get("launcher"))
    if launcher is not None and launcher not in SLURM_LAUNCHERS:
        raise SiteConfigError(
            f"{where}: slurm.launcher must be one of {', '.join(SLURM_LAUNCHERS)}"
        )
    above = s.get("agents_above_nodes", 8)
    if isinstance(above, bool) or not isinstance(above, int) or above < 0:
        raise SiteConfigError(f"{where}: slurm.agents_above_nodes must be a whole number >= 0")
    return SlurmDefaults(
        partition=_opt_str(f"{where}: slurm.partition", s.get("partition")),
        account=_opt_str(f"{where}: slurm.account", s.get("account")),
        time=_opt_str(f"{where}: slurm.time", s.get("time")),
        sbatch_extra=_str_list(f"{where}: slurm.sbatch_extra", s.get("sbatch_extra", [])),
        srun_extra=_str_list(f"{where}: slurm.srun_extra", s.get("srun_extra", [])),
        gpus_per_node=gpn,
        network_interface=_opt_str(f"{where}: slurm.network_interface", s.get("network_interface")),
        launcher=launcher,
        agents_above_nodes=above,
        agent_start_timeout=_seconds(s, "agent_start_timeout_seconds", 60.0, where),
        agent_lost_after=_seconds(s, "agent_lost_after_seconds", 10.0, where),
    )


def _seconds(table: dict[str, Any], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
        raise SiteConfigError(f"{where}: slurm.{key} must be a positive number of seconds")
    return float(value)


def _readiness_timeout(timeout: Any, where: str) -> float | None:
    """``readiness.timeout_seconds``: a finite number of seconds above zero (a TOML
    boolean is not one, though Python counts it as an int)."""
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < float("inf")
    ):
        raise SiteConfigError(f"{where}: readiness.timeout_seconds must be a positive number")
    return float(timeout)


def node_local_root(site: SiteConfig, env: Mapping[str, str] | None = None) -> str:
    """Where the job's node-local directories go: the site's ``[storage] node_local`` when
    the admin set it; else ``$SLURM_TMPDIR`` when the job has one (sites that set it give
    every job a private, node-local directory at the same path on each of its nodes, which
    Slurm removes at the end); else ``/tmp``.

    Read where the plan is made: inside an allocation that is the batch step, whose
    ``SLURM_TMPDIR`` is the one the job's steps see; a dry run on a login node shows
    ``/tmp``.
    """
    if site.node_local:
        return site.node_local
    tmpdir = (os.environ if env is None else env).get("SLURM_TMPDIR", "").rstrip("/")
    if tmpdir and os.path.isabs(tmpdir) and "\n" not in tmpdir:
        return tmpdir
    return DEFAULT_NODE_LOCAL


def load(path: str | None = None) -> SiteConfig:
    """Read the site config; a missing default file is an empty config, a missing named one
    is an error (an admin who points at a file means it)."""
    explicit = path or os.environ.get("SRT_SITE_CONFIG")
    target = explicit or DEFAULT_PATH
    from srt_services.safefile import UnsafeFile, read_file

    if os.path.realpath(target) == os.devnull:  # "no site config", said explicitly
        return parse({}, target)
    try:
        # a FIFO or a device there is refused at once, never waited on
        raw = read_file(target, MAX_SIZE)
    except FileNotFoundError:
        if explicit:
            raise SiteConfigError(f"site config {target} does not exist") from None
        return SiteConfig()
    except UnsafeFile as exc:
        raise SiteConfigError(f"site config {exc}") from None
    import tomllib  # only when a file exists: most machines have none (~7 ms of patterns)

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SiteConfigError(f"{target} is not UTF-8 text: {exc.reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SiteConfigError(f"{target}: {exc}") from None
    except RecursionError:
        raise SiteConfigError(f"{target}: tables or arrays nested too deeply") from None
    return parse(data, target)


@lru_cache(maxsize=8)
def _cached(path: str | None, env_value: str | None) -> SiteConfig:
    return load(path)


def current() -> SiteConfig:
    """The site config for this process (read once per distinct ``SRT_SITE_CONFIG``)."""
    return _cached(None, os.environ.get("SRT_SITE_CONFIG"))
