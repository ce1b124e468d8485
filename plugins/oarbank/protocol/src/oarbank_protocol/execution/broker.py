"""The agent's container broker: containers a module's manifest declares, started with
podman on the module's request, owned and reaped like any object the module owns.

A confined module cannot start containers itself (no ``/proc``, no capabilities, a
read-only root: podman fails inside its sandbox), and an unconfined one should not have to
hold a container runtime's keys. It asks the broker instead, over a Unix socket the agent
binds into its sandbox (``OARBANK_BROKER_SOCKET``), for one of the containers its manifest
names (``sandbox.containers``): the image, command and network are the manifest's. The
broker labels each with the protocol's ownership labels (``oarbank.attempt_id``,
``oarbank.node``, ``oarbank.service``) plus its own, so the service's ``list_owned`` as the
agent sees it includes them (:class:`BrokeredOps`) and the reaper and the teardown destroy
them with the module's own objects.

podman's settings on a host are the site's: ``OARBANK_PODMAN`` (the binary),
``OARBANK_PODMAN_ARGS`` (global options, e.g. ``--runtime runc --cgroup-manager cgroupfs``)
and ``OARBANK_PODMAN_RUN_ARGS`` (``run`` options, e.g. ``--ulimit nofile=4096:4096``), read
from the agent's environment. The broker pulls nothing (``--pull never``): an image must be
on the node already.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oarbank_protocol.documents import ErrorDocument, OpResult, OwnedList, OwnedObject
from oarbank_protocol.errors import OpFailed
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.manifest import ContainerSpec
from oarbank_protocol.names import check_name

SOCKET_VAR = "OARBANK_BROKER_SOCKET"
#: object ids the broker owns (the rest go to the module's ``destroy``)
PREFIX = "podman:"
BROKER_LABEL = "oarbank.broker"
MODULE_LABEL = "oarbank.module"
CONTAINER_LABEL = "oarbank.container"
#: podman answers within seconds; a hung one must not hang an op or the reaper
TIMEOUT_S = 60.0


def _env_args(name: str) -> tuple[str, ...]:
    return tuple(shlex.split(os.environ.get(name, "")))


@dataclass
class ContainerBroker:
    module: str
    node_id: str
    containers: Mapping[str, ContainerSpec]
    podman: str | None = field(
        default_factory=lambda: os.environ.get("OARBANK_PODMAN") or shutil.which("podman")
    )
    global_args: tuple[str, ...] = field(default_factory=lambda: _env_args("OARBANK_PODMAN_ARGS"))
    run_args: tuple[str, ...] = field(default_factory=lambda: _env_args("OARBANK_PODMAN_RUN_ARGS"))

    @classmethod
    def for_specs(
        cls, module: str, node_id: str, specs: Sequence[ContainerSpec]
    ) -> ContainerBroker:
        return cls(module, node_id, {spec.name: spec for spec in specs})

    async def _podman(self, op: str, *args: str) -> str:
        if self.podman is None:
            raise OpFailed(
                op, 127, "podman is not installed on this node (the container broker needs it)"
            )
        proc = await asyncio.create_subprocess_exec(
            self.podman,
            *self.global_args,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise OpFailed(
                op, 124, f"podman {args[0]} did not answer within {TIMEOUT_S:g} s"
            ) from None
        if proc.returncode != 0:
            text = err.decode(errors="replace").strip()[-500:]
            raise OpFailed(
                op,
                proc.returncode or 1,
                f"podman {args[0]} failed: {text}",
                error=ErrorDocument(code=11, msg=text or "podman failed", retryable=True),
                stderr_tail=text,
            )
        return out.decode(errors="replace")

    async def start(self, container: str, *, service: str, attempt_id: str) -> str:
        """Start the declared ``container`` for ``attempt_id``; its object id."""
        spec = self.containers.get(container)
        if spec is None:
            known = ", ".join(sorted(self.containers)) or "none"
            raise ValueError(f"module {self.module} declares no container {container!r} ({known})")
        check_name(attempt_id, "attempt id")
        check_name(service, "service")
        labels = {
            "oarbank.attempt_id": attempt_id,
            "oarbank.node": self.node_id,
            "oarbank.service": service,
            MODULE_LABEL: self.module,
            BROKER_LABEL: "1",
            CONTAINER_LABEL: spec.name,
        }
        args = ["run", "-d", "--pull", "never", f"--network={spec.network}", *self.run_args]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        out = await self._podman("start", *args, "--", spec.image, *spec.argv)
        return PREFIX + out.strip().splitlines()[-1]

    async def owned(self, service: str | None = None) -> list[OwnedObject]:
        """The broker's containers of this module on this node (of ``service``)."""
        out = await self._podman(
            "list_owned",
            "ps",
            "-a",
            "--filter",
            f"label={BROKER_LABEL}=1",
            "--filter",
            f"label={MODULE_LABEL}={self.module}",
            "--filter",
            f"label=oarbank.node={self.node_id}",
            "--format",
            "json",
        )
        rows: Any = json.loads(out or "[]") or []
        objects: list[OwnedObject] = []
        for row in rows:
            labels = {str(k): str(v) for k, v in (row.get("Labels") or {}).items()}
            if service is not None and labels.get("oarbank.service") != service:
                continue
            objects.append(
                OwnedObject(
                    id=PREFIX + str(row["Id"]),
                    kind="container",
                    labels={k: v for k, v in labels.items() if k.startswith("oarbank.")},
                    # never "busy": the agent destroys one only when its attempt is gone
                    # (reaping) or everything is (teardown), whether it still runs or not
                    busy=False,
                )
            )
        return objects

    async def destroy(self, object_id: str, *, force: bool = False) -> OpResult:
        """Remove one of the broker's containers, running or not (it is never busy: see
        :meth:`owned`); an unknown one is no error (idempotent), and only this module's
        containers on this node can be named."""
        cid = object_id.removeprefix(PREFIX)
        if not cid or any(c not in "0123456789abcdef" for c in cid):
            raise OpFailed("destroy", 3, f"not a container id: {object_id!r}")
        if object_id not in {o.id for o in await self.owned()}:
            return OpResult(changed=False, msg="no such container")
        await self._podman("destroy", "rm", "-f", "-t", "5", cid)
        return OpResult(changed=True)

    async def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A request on the broker socket: ``{"op": "start", "container", "service",
        "attempt_id"}`` or ``{"op": "list", "service"}``."""
        op = request.get("op")
        try:
            if op == "start":
                oid = await self.start(
                    str(request.get("container")),
                    service=str(request.get("service")),
                    attempt_id=str(request.get("attempt_id")),
                )
                return {"ok": True, "id": oid}
            if op == "list":
                service = request.get("service")
                objects = await self.owned(str(service) if service is not None else None)
                return {"ok": True, "objects": [o.model_dump(mode="json") for o in objects]}
        except (OpFailed, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown op {op!r} (start, list)"}


class BrokeredOps:
    """A service's ops as the agent uses them when its module has a broker: ``list_owned``
    holds the module's objects and the broker's containers of this service, and
    ``destroy`` of a container goes to the broker. Everything else is the module's."""

    def __init__(self, ops: ServiceOps, broker: ContainerBroker, service: str) -> None:
        self.ops = ops
        self.broker = broker
        self.service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ops, name)

    async def fingerprint(self) -> Any:
        return await self.ops.fingerprint()

    async def start(self) -> OpResult:
        return await self.ops.start()

    async def stop(self) -> OpResult:
        return await self.ops.stop()

    async def status(self) -> Any:
        return await self.ops.status()

    async def ready(self) -> Any:
        return await self.ops.ready()

    async def list_owned(self) -> OwnedList:
        own = await self.ops.list_owned()
        return OwnedList(objects=[*own.objects, *await self.broker.owned(self.service)])

    async def destroy(self, object_id: str, *, force: bool = False) -> OpResult:
        if object_id.startswith(PREFIX):
            return await self.broker.destroy(object_id, force=force)
        return await self.ops.destroy(object_id, force=force)


#: a request is one short JSON line
MAX_REQUEST = 64 * 1024


async def serve_broker(broker: ContainerBroker, path: Path) -> asyncio.AbstractServer:
    """Answer the module on ``path``: one JSON object per line in, one per line out (the
    agent's control-socket framing), only to the agent's own user (mode 0600)."""

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line) if len(line) <= MAX_REQUEST else None
            except ValueError:
                request = None
            answer = (
                await broker.answer(request)
                if isinstance(request, dict)
                else {"ok": False, "error": "expected one JSON object on a line"}
            )
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(client, path=str(path))
    os.chmod(path, 0o600)
    return server


def with_broker_socket(context: ExecContext) -> tuple[ExecContext, Path]:
    """``context`` with a broker socket in a fresh short directory (a Unix socket path has
    107 bytes, a data directory may be longer), bound read-write into the module's sandbox
    so that a confined module reaches it at the same path."""
    sock_dir = Path(tempfile.mkdtemp(prefix="oarbank-broker-"))
    socket = sock_dir / "broker.sock"
    confinement = context.confinement
    if confinement is not None:
        confinement = dataclasses.replace(
            confinement, paths=(*confinement.paths, (str(sock_dir), True))
        )
    return dataclasses.replace(context, broker_socket=socket, confinement=confinement), socket
