"""Typed protocol calls: the seven ops as async methods returning documents.

The lifecycle manager depends only on :class:`ServiceOps`, so tests can substitute an
in-memory implementation and the real one (:class:`ProtocolClient`) stays a thin layer over
the executor.
"""

from __future__ import annotations

from typing import Protocol

from oarbank_protocol.documents import Fingerprint, OpResult, OwnedList, Status
from oarbank_protocol.execution.executor import Executor
from oarbank_protocol.names import check_object_id


class FingerprintSource(Protocol):
    async def fingerprint(self) -> Fingerprint: ...


class ServiceOps(FingerprintSource, Protocol):
    """What the lifecycle manager needs from a service; raises ExecError subclasses."""

    async def start(self) -> OpResult: ...

    async def stop(self) -> OpResult: ...

    async def status(self) -> Status: ...

    async def ready(self) -> Status: ...

    async def list_owned(self) -> OwnedList: ...

    async def destroy(self, object_id: str, *, force: bool = False) -> OpResult: ...


class ProtocolClient:
    """:class:`ServiceOps` over a real executable."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    @property
    def name(self) -> str:
        return self.executor.service

    async def fingerprint(self) -> Fingerprint:
        return (await self.executor.call("fingerprint", Fingerprint)).document

    async def start(self) -> OpResult:
        return (await self.executor.call("start", OpResult)).document

    async def stop(self) -> OpResult:
        return (await self.executor.call("stop", OpResult)).document

    async def status(self) -> Status:
        return (await self.executor.call("status", Status)).document

    async def ready(self) -> Status:
        return (await self.executor.call("ready", Status)).document

    async def list_owned(self) -> OwnedList:
        return (await self.executor.call("list_owned", OwnedList)).document

    async def destroy(self, object_id: str, *, force: bool = False) -> OpResult:
        check_object_id(object_id)
        args = [object_id, "--force"] if force else [object_id]
        return (await self.executor.call("destroy", OpResult, *args)).document
