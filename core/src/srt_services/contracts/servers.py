"""Kinds that run one server binary on ports they own (etcd, NATS, Mooncake, exporters...).

Plugins must not import each other, so what every such kind needs lives here: a base class
(:class:`ServerKind`) that owns the binary lookup, the port ledger entries, the ``binary``
option, ``external`` addresses and the early "binary missing" failure, plus the small
helpers it is built from for kinds that need only a part of it.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.contracts.kind import KindOptions, ServiceKind
from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.contracts.context import InstanceContext
    from srt_services.recipe.models import Recipe, ServiceSpec


def url_host(ip: str) -> str:
    """An IP as the host part of a URL (IPv6 needs brackets, or the port reads as a group)."""
    return f"[{ip}]" if ":" in ip and not ip.startswith("[") else ip


def server_binary(choice: str | None, key: str, binaries: Mapping[str, str] | None = None) -> str:
    """The recipe's choice, else the site's ``[binaries] <key>`` (``binaries``: the
    instance's :attr:`~srt_services.contracts.context.InstanceContext.binaries`), else
    ``key`` on PATH.

    Looked up by name rather than resolved here: planning must not touch the machine (dry
    runs happen on a login node), and the service's own node is where the binary must exist.
    """
    if choice:
        return choice
    return (binaries or {}).get(key) or key


def binary_option_problems(spec: ServiceSpec, binary: str | None) -> list[Problem]:
    """Problems of an ``options.binary`` value, relative to the service."""
    where = ("options", "binary")
    if binary is None:
        return []
    if not binary.strip():
        return [Problem(where, "must not be blank (omit it to use the default)")]
    if "/" in binary and not binary.startswith("/"):
        return [
            Problem(
                where,
                f"must be a command name looked up on PATH or an absolute path, got {binary!r}"
                " (a relative path would depend on the directory srt was started from)",
            )
        ]
    if spec.command is not None and spec.external is None:
        return [
            Problem(
                where,
                "has no effect: the recipe's command replaces the kind's command",
                warning=True,
            )
        ]
    return []


def dir_option_problems(where: tuple[str, ...], value: str) -> list[Problem]:
    """Problems of an option that names a directory the server writes (``data_dir``).

    It must be an absolute path or start with a placeholder srt renders to one
    (``{local_dir}``, node-local and removed when the job ends; ``{work_dir}``, in the job
    directory): a relative path would depend on where the process starts, and a typo in a
    placeholder would make a directory literally named ``{local_dr}``. Quotes, backslashes
    and line breaks are refused too, so the value fits a config file's quoted string.
    """
    from srt_services.recipe.placeholders import unknown_placeholders

    unknown = unknown_placeholders(value)
    if unknown:
        return [
            Problem(
                where,
                f"unknown placeholder {{{unknown[0]}}} (srt renders {{local_dir}} and"
                " {work_dir} here, among others)",
            )
        ]
    if not value.startswith(("/", "{")):
        return [
            Problem(
                where,
                "must be an absolute path or start with {local_dir} or {work_dir},"
                f" got {value!r}",
            )
        ]
    if any(ch in value for ch in '"\\\n\r\x00'):
        return [Problem(where, "must not contain a double quote, a backslash or a line break")]
    return []


def one_per_job_problems(recipe: Recipe, kind: str, what: str) -> list[Problem]:
    """A problem on every enabled ``kind`` entry after the first, for a server a job has one
    of (a discovery plane, a cache master: the consumers' environment can name only one).

    ``what`` finishes "a job has one ...", saying why: ``"etcd (ETCD_ENDPOINTS names one
    discovery plane)"``. A disabled entry is not counted, so a spare may be kept.
    """
    entries = [(i, s) for i, s in enumerate(recipe.services) if s.type == kind and s.enabled]
    if len(entries) < 2:
        return []
    first = entries[0][1].name
    return [
        Problem(
            ("services", i, "type"),
            f"a job has one {what}; services[{first}] is already one: drop this entry or set"
            " enabled: false",
        )
        for i, _spec in entries[1:]
    ]


def venv_bin() -> str:
    """The directory of the Python running srt: where ``pip install 'srt-x[server]'`` puts
    a server's console script, found even when the venv was never activated."""
    return os.path.dirname(os.path.abspath(sys.executable))


#: In an instance's work directory: the look-up on its node found nothing to run and the
#: service may run without (the file holds why); the supervisor marks it ``unavailable``.
UNAVAILABLE_FILE = "srt-unavailable"
#: In an instance's work directory: why its process failed, in its own words (one line),
#: written before it exits (a refused admission); srt adds it to the ``exited`` event,
#: ``srt status`` and the job's cause, and removes it before each launch.
EXIT_REASON_FILE = "srt-exit-reason"


def missing_binary_check(binary: str, kind: str, hint: str, optional: bool = False) -> str:
    """Shell that fails fast, with install advice, when the server binary is not there.

    It runs on the service's node, in its environment (container included), right before the
    server would start, so it checks the filesystem that matters; the infra phase then fails
    with this line in the log tail, before any worker or frontend is launched. A bare name
    is looked up on PATH first, then in srt's own venv ``bin`` (appended to PATH, so what the
    job's environment puts first still wins).
    """
    text = f"srt-{kind}: cannot find the {kind} server binary {binary}; {hint}"
    for ch in ("\\", '"', "`", "$"):  # literal inside double quotes
        text = text.replace(ch, "\\" + ch)
    if "/" not in binary:
        text += " (PATH=$PATH)"  # a bare name: where it was looked for is the useful part
    found = f"command -v -- {shlex.quote(binary)} >/dev/null 2>&1"
    fail = f'{found} || {{ echo "{text}" >&2; exit 127; }}'
    if optional:
        # the reason goes where the supervisor looks ({work_dir} is rendered by srt)
        note = f'echo "{text}" > "{{work_dir}}/{UNAVAILABLE_FILE}"'
        fail = f'{found} || {{ echo "{text}" >&2; {note}; exit 127; }}'
    if "/" in binary:
        return fail
    extra = shlex.quote(venv_bin())
    return (
        f'{found} || {{ [ -x {extra}/{shlex.quote(binary)} ] && PATH="$PATH:"{extra}'
        f" && export PATH; }}\n{fail}"
    )


class ServerOptions(KindOptions):
    """Base of a server kind's options: where its binary is. Subclasses add their ports."""

    binary: str | None = Field(
        None,
        description="Server binary: a command name looked up on PATH (then in srt's own venv"
        " bin directory) or an absolute path. Default: the site config's [binaries] entry for"
        " this kind, else the kind's usual command name.",
    )


class ServerKind(ServiceKind):
    """Base of kinds that run one server binary listening on ports the kind owns.

    A subclass names its binary (:attr:`binary_name`, also its key in the site config's
    ``[binaries]``), says how to install it (:attr:`install_hint`), lists its ports by role
    (:meth:`ports`) and writes the server's arguments (:meth:`server_args`). The base then
    supplies what every such kind needs and would otherwise copy: the argv, the port
    ledger entries, a clear early failure when the binary is missing, the ``binary`` option
    rules, distinct ports, and the ``external`` case (nothing launched; consumers pointed
    at the given address by :meth:`consumer_env`).
    """

    Options: ClassVar[type[KindOptions]] = ServerOptions
    #: The command name, and the key of the site config's ``[binaries]`` table.
    binary_name: ClassVar[str]
    #: How to get the binary, shown when it is missing ("install it (Debian: ...)").
    install_hint: ClassVar[str] = ""

    # ------------------------------------------------------------------ to override

    def ports(self, options: Any) -> Mapping[str, int | None]:
        """The ports the server binds, by option name (``None``: that listener is off)."""
        return {}

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        """Arguments after the binary (the recipe's ``args`` are appended by srt)."""
        return []

    def consumer_env(self, spec: ServiceSpec, options: Any, host: str | None) -> dict[str, str]:
        """What consumers are told: ``host`` is the server node's address in URL form, or
        ``None`` for an ``external`` service (then read ``spec.external``)."""
        return {}

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        """Problems of this kind's own options, beyond the checks every server gets."""
        return ()

    # ------------------------------------------------------------------ supplied

    def binary(self, options: Any, ctx: InstanceContext | None = None) -> str:
        """The binary to run: the recipe's ``options.binary``, the site's (known to the
        instance's context), or the name."""
        binaries = ctx.binaries if ctx is not None else None
        return server_binary(getattr(options, "binary", None), self.binary_name, binaries)

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        out = binary_option_problems(spec, getattr(options, "binary", None))
        seen: dict[int, str] = {}
        for key, port in self.ports(options).items():
            if port is None:
                continue
            if port in seen:
                out.append(
                    Problem(
                        ("options", key),
                        f"must differ from {seen[port]} ({port}): {self.binary_name} binds both",
                    )
                )
            else:
                seen[port] = key
        out.extend(self.validate_server(spec, options, recipe))
        return out

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        return [self.binary(options, ctx), *self.server_args(spec, options, ctx)]

    def preamble(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> str | None:
        if spec.command is not None:
            return None  # the recipe's own command: not ours to check
        return missing_binary_check(
            self.binary(options, ctx),
            self.name,
            self.install_hint,
            optional=self.may_be_unavailable(spec, options),
        )

    def may_be_unavailable(self, spec: ServiceSpec, options: Any) -> bool:
        """Whether a node without the binary runs the job without this instance (marked
        ``unavailable``) rather than failing it. Only a non-critical service can be."""
        return False

    def listen_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        return tuple(p for p in self.ports(options).values() if p is not None)

    def discovery_env(self, spec: ServiceSpec, options: Any, address: str | None) -> dict[str, str]:
        return self.consumer_env(spec, options, None if address is None else url_host(address))


class DiscoveryServerKind(ServerKind):
    """Base of a discovery plane's server (etcd, NATS): what the job's processes find each
    other through, so every plane is placed, started and gated alike.

    Shared because the planes must agree, not merely look alike: they share the infra node
    (all dedicated or none), start first (phase ``infra``) and are critical (a job whose
    registry died is measuring nothing), may be ``external``, never receive discovery
    environment themselves, and are given minutes to come up (a cold container on a busy
    node has needed them). Consumers are told one address in :attr:`env_key`: the
    ``external`` one as written, else the server's (:meth:`consumer_url`).
    """

    #: The variable consumers find the plane in (``ETCD_ENDPOINTS``).
    env_key: ClassVar[str]

    default_start: ClassVar[str] = "infra"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "infra"
    allowed_placements: ClassVar[frozenset[str] | None] = frozenset({"head", "infra", "dedicated"})
    supports_external: ClassVar[bool] = True
    supports_dedicated: ClassVar[bool] = True
    shares_infra_node: ClassVar[bool] = True
    is_discovery_plane: ClassVar[bool] = True
    default_readiness_timeout: ClassVar[float] = 300.0

    def consumer_url(self, options: Any, host: str) -> str:
        """The server's address as consumers are told it (``host`` in URL form)."""
        raise NotImplementedError

    def consumer_env(self, spec: ServiceSpec, options: Any, host: str | None) -> dict[str, str]:
        if host is None:
            return {self.env_key: (spec.external or "").strip()}
        return {self.env_key: self.consumer_url(options, host)}


def switched_off_problems(recipe: Recipe, kind: str, message: str) -> list[Problem]:
    """A warning (``message``) on each disabled entry named ``kind`` while no entry of that
    type is enabled, for a server srt implies when the job needs it: an entry of its name
    keeps the implied one out, so a disabled one switches the server off altogether."""
    if any(s.type == kind and s.enabled for s in recipe.services):
        return []
    return [
        Problem(("services", i, "enabled"), message, warning=True)
        for i, s in enumerate(recipe.services)
        if s.name == kind and not s.enabled
    ]
