"""The module sandbox: a module's services and probes confined with bubblewrap.

The spec runs every executable of a module under the module sandbox with the grants the
module declares and the site approves. Here that is bubblewrap (Debian's ``bwrap``, the
mechanism Flatpak uses): a private mount namespace in which the system's ``/usr`` and
``/etc`` are read-only, the bundle read-only, the module's data directory read-write (it holds
HOME and TMPDIR), and nothing else of the host exists except the approved grants (paths,
host tools); without a network grant the executable gets a new network namespace with only a
loopback that is down. No PID namespace: a service's ``start`` leaves a daemon behind that
must outlive the op, and the agent kills op trees by process group from outside; so no
``/proc`` either (``/proc/PID/root`` of a host process is a way out), and no capabilities.

A declared grant the site does not approve refuses the module before anything starts (the
module said it needs it, so running it without would only fail later and less clearly).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from oarbank_protocol.errors import SandboxRefused
from oarbank_protocol.manifest import SandboxSpec

#: the system parts every executable needs to run at all (interpreters, libraries, users)
_SYSTEM_DIRS: Final = ("usr", "etc")
_MERGED_DIRS: Final = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def _find_bwrap() -> str | None:
    return shutil.which("bwrap")


@dataclass(frozen=True)
class SitePolicy:
    """What the site (the node's operator) approves for modules' sandboxes."""

    approved_paths: tuple[Path, ...] = ()
    """A declared path is approved when it lies inside one of these."""
    allow_network: bool = False
    allow_unconfined: bool = False
    """Run a module that asks for the sandbox unconfined when this host has no bubblewrap."""
    bwrap: str | None = field(default_factory=_find_bwrap)


@dataclass(frozen=True)
class Confinement:
    """The resolved sandbox of one module: turns an argv into a confined one."""

    bwrap: str
    bundle_root: Path
    data_dir: Path
    paths: tuple[tuple[str, bool], ...] = ()
    network: bool = False
    tool_paths: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """What the module may reach, for status reports."""
        return {
            "confined": "bwrap",
            "paths": [{"path": path, "write": write} for path, write in self.paths],
            "network": self.network,
            "tools": list(self.tool_paths),
        }

    def argv(self, inner: Sequence[str]) -> list[str]:
        """``bwrap ... -- inner``; ``inner[0]`` must be an absolute path."""
        args = [self.bwrap]
        for name in _SYSTEM_DIRS:
            if os.path.isdir(f"/{name}"):
                args += ["--ro-bind", f"/{name}", f"/{name}"]
        for name in _MERGED_DIRS:
            host = f"/{name}"
            if os.path.islink(host):
                args += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                args += ["--ro-bind", host, host]
        # No /proc: without a PID namespace it would show the host's processes, and
        # /proc/PID/root of any of them (the agent's own) is the host's root, writable; and no
        # capabilities, so root inside cannot mount its way out either.
        args += ["--dev", "/dev", "--cap-drop", "ALL"]
        args += ["--ro-bind", str(self.bundle_root), str(self.bundle_root)]
        args += ["--bind", str(self.data_dir), str(self.data_dir)]
        # a grant missing on this node is simply absent inside (as if not granted) rather
        # than a bwrap error on every op
        for path, write in self.paths:
            args += ["--bind-try" if write else "--ro-bind-try", path, path]
        for path in self.tool_paths:
            args += ["--ro-bind-try", path, path]
        if not self.network:
            args.append("--unshare-net")
        # the root (and the directories bwrap made for mount points) read-only last: a write
        # anywhere but the data directory and write grants fails instead of landing in a
        # scratch tmpfs (TMPDIR is inside the data directory)
        args += ["--remount-ro", "/", "--unshare-ipc", "--unshare-uts"]
        args += ["--chdir", str(self.bundle_root), "--"]
        return [*args, *inner]


def _tool_path(name: str, value: Any) -> str | None:
    """The host file a granted tool names: its value, or the value's ``path``."""
    if isinstance(value, Mapping):
        value = value.get("path")
    return value if isinstance(value, str) and value.startswith("/") else None


def _approved(path: str, site: SitePolicy) -> bool:
    """Inside an approved directory once symlinks are resolved (a link out is not inside).

    A site path that cannot name a file (a NUL in it, from a YAML escape) approves nothing.
    """
    real = os.path.realpath(path)
    for root in site.approved_paths:
        if "\x00" in str(root) or not os.path.isabs(root):
            continue
        base = os.path.realpath(root)
        if os.path.commonpath([real, base]) == base:
            return True
    return False


def ungranted(spec: SandboxSpec, site: SitePolicy, tools: Mapping[str, Any]) -> list[str]:
    """Each declared grant the site does not approve, as a sentence (empty: all approved)."""
    problems = [
        f"path {grant.path} ({'read-write' if grant.write else 'read-only'}) is not inside "
        "a path the site approves"
        for grant in spec.paths
        if not _approved(grant.path, site)
    ]
    if spec.network and not site.allow_network:
        problems.append("network is not approved by the site")
    for name in spec.tools:
        if name not in tools:
            problems.append(f"host tool {name!r} is not granted by the site (tools file)")
        elif _tool_path(name, tools[name]) is None:
            problems.append(f"host tool {name!r} has no absolute path to bind in")
    return problems


def approved_part(spec: SandboxSpec, site: SitePolicy, tools: Mapping[str, Any]) -> SandboxSpec:
    """The declared grants the site approves, the rest dropped (the conformance runner runs a
    module this way, so a module that truly needs an unapproved grant fails where it uses it)."""
    return SandboxSpec(
        paths=[grant for grant in spec.paths if _approved(grant.path, site)],
        network=spec.network and site.allow_network,
        tools=[name for name in spec.tools if _tool_path(name, tools.get(name)) is not None],
    )


def resolve(
    module: str,
    spec: SandboxSpec | None,
    site: SitePolicy,
    *,
    bundle_root: Path,
    data_dir: Path,
    tools: Mapping[str, Any],
) -> Confinement | None:
    """The confinement for a module, None for one that runs unconfined; refusals raise."""
    if spec is None:
        return None
    problems = ungranted(spec, site, tools)
    if problems:
        raise SandboxRefused(
            f"module {module!r}: its sandbox asks for what the site does not approve: "
            + "; ".join(problems)
        )
    if site.bwrap is None:
        if site.allow_unconfined:
            return None
        raise SandboxRefused(
            f"module {module!r} runs in a sandbox and bubblewrap (bwrap) is not installed on "
            "this host; install it (Debian: bubblewrap) or let the site allow unconfined "
            "modules (--allow-unconfined)"
        )
    tool_paths: list[str] = []
    for name in spec.tools:
        path = _tool_path(name, tools[name])
        assert path is not None
        tool_paths.append(path)
    return Confinement(
        bwrap=site.bwrap,
        bundle_root=bundle_root,
        data_dir=data_dir,
        paths=tuple((grant.path, grant.write) for grant in spec.paths),
        network=spec.network,
        tool_paths=tuple(tool_paths),
    )
