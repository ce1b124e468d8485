"""``ray-fleet``: ready when the Ray head lists every planned member ALIVE.

Each instance's own readiness only says that its ``ray start`` got as far as printing
"Ray runtime started"; the cluster exists when the head's GCS counts every raylet as
ALIVE. The head's dashboard publishes that list (``GET /api/v0/nodes``, Ray's state API),
so the gate asks it, over plain HTTP on the dashboard port the benchmark also uses.

Nodes are counted, then matched by address to name the missing ones. Counting rather
than matching decides: on ``srt run`` every virtual node is this machine, and Ray replaces
a loopback ``--node-ip-address`` by the machine's own address, so the addresses Ray
reports are not the ones srt planned (components.md §5); on a real cluster each raylet
registers with its node's own address and the match names exactly who is missing.

The head's raylet is ALIVE in that list a few seconds before its ``ray start`` has
finished starting (Ray 2.60 still talks to the GCS then). A SIGTERM in that window, which
reaches the GCS too (srt signals the whole group or step), leaves ``ray start`` waiting 30 s
for the dead GCS before it stops anything. So the gate also waits for the head's own log to
say it started (``started``): once the fleet is ready, a stop takes seconds.

``/api/v0/nodes`` rather than ``/nodes?view=summary``: the summary is keyed by IP, so two
raylets on one address show as one (seen with Ray 2.60).
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator
from srt_services.extend import Port, Probe, ProbeResult, StrictModel, url_host

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, ProbeTarget

#: Ray's state API; ``limit`` lifts its default page of 100 nodes (10,000 is its maximum).
NODES_PATH = "/api/v0/nodes?limit=10000"
#: The node list of a large cluster is a few hundred bytes per node; anything larger than
#: this is not an answer worth parsing.
MAX_BODY = 16 << 20
#: Missing members named in a message before the rest are counted.
NAMED = 20
#: How much of the head's log is searched for its start-up line.
MAX_LOG = 4 << 20


class Member(StrictModel):
    node: str = Field(description="Node name (for messages).")
    ip: str = Field(description="The address its raylet registers with.")


class FleetConfig(StrictModel):
    port: Port = Field(description="The head's dashboard port.")
    members: list[Member] = Field(
        min_length=1, description="Every Ray node that must be ALIVE, the head included."
    )
    started: str | None = Field(
        None,
        description="A regular expression the first instance's own log must show (written by"
        " this attempt) before the node list counts: the head's `ray start` finished starting.",
    )

    @field_validator("started")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"is not a valid regular expression: {exc}") from None
        return value


def log_shows(path: str, offset: int, pattern: str) -> bool:
    """Whether the log at ``path``, from ``offset`` on (this attempt's part), has a line
    matching ``pattern``. Reads at most :data:`MAX_LOG` bytes: a start-up line comes early."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(MAX_LOG)
    except OSError:
        return False
    return re.search(pattern.encode(errors="surrogateescape"), data) is not None


async def get_json(host: str, port: int, target: str, timeout: float) -> tuple[Any, str]:
    """``(document, "")`` for ``GET target`` answered 200 with JSON, else ``(None, why)``.

    HTTP/1.0 so the server answers with a plain body and closes the connection (no chunked
    transfer to decode); the body is read up to :data:`MAX_BODY`.
    """
    request = (
        f"GET {target} HTTP/1.0\r\nHost: {url_host(host)}:{port}\r\n"
        "Accept: application/json\r\nUser-Agent: srt-ray\r\n\r\n"
    ).encode()
    writer = None
    raw = b""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            while len(raw) <= MAX_BODY:
                chunk = await reader.read(1 << 16)
                if not chunk:
                    break
                raw += chunk
    except TimeoutError:
        return None, f"no answer within {timeout:g}s"
    except OSError as exc:
        return None, errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    finally:
        if writer is not None:
            writer.close()
    if len(raw) > MAX_BODY:
        return None, f"answer larger than {MAX_BODY >> 20} MiB"
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(None, 2)
    if len(status) < 2 or not status[0].startswith(b"HTTP/") or not status[1].isdigit():
        return None, "not an HTTP answer" if raw else "connection closed without an answer"
    if status[1] != b"200":
        return None, f"HTTP {status[1].decode()}"
    try:
        return json.loads(body), ""
    except ValueError:
        return None, f"not JSON: {body[:80].decode(errors='replace')!r}"


def node_list(doc: Any) -> list[Mapping[str, Any]] | None:
    """The node records of a ``/api/v0/nodes`` answer, or ``None`` for another shape."""
    try:
        nodes = doc["data"]["result"]["result"]
    except (KeyError, TypeError):
        return None
    if not isinstance(nodes, list) or not all(isinstance(n, Mapping) for n in nodes):
        return None
    return nodes


def judge(members: Sequence[Mapping[str, str]], nodes: Sequence[Mapping[str, Any]]) -> ProbeResult:
    """Whether ``nodes`` (Ray's records) hold as many ALIVE raylets as ``members`` (srt's
    plan), and if not, who is missing, in words a user can act on."""
    alive = [n for n in nodes if n.get("state") == "ALIVE"]
    want = len(members)
    if len(alive) >= want:
        return ProbeResult(True, f"{len(alive)}/{want} Ray nodes ALIVE")
    unmatched = Counter(str(n.get("node_ip")) for n in alive)
    missing: list[Mapping[str, str]] = []
    for m in members:
        if unmatched[m["ip"]] > 0:
            unmatched[m["ip"]] -= 1
        else:
            missing.append(m)
    dead = {str(n.get("node_ip")): n for n in nodes if n.get("state") == "DEAD"}

    def label(m: Mapping[str, str]) -> str:
        text = f"{m['node']} ({m['ip']})"
        gone = dead.get(m["ip"])
        if gone is not None:
            why = gone.get("state_message")
            text += f" DEAD: {why}" if why else " DEAD"
        return text

    names = ", ".join(label(m) for m in missing[:NAMED])
    if len(missing) > NAMED:
        names += f" and {len(missing) - NAMED} more"
    short = want - len(alive)
    detail = f"{len(alive)}/{want} Ray nodes ALIVE; missing: "
    detail += names if short == len(missing) else f"{short} of {names}"
    elsewhere = sorted(ip for ip, count in unmatched.items() if count > 0)
    if elsewhere:
        detail += (
            f"; ALIVE at {', '.join(elsewhere)}, which srt did not plan (Ray replaces a"
            " loopback --node-ip-address by the machine's own address)"
        )
    return ProbeResult(False, detail)


class RayFleetProbe(Probe):
    name: ClassVar[str] = "ray-fleet"
    summary: ClassVar[str] = (
        "The Ray head's node list (GET /api/v0/nodes on its dashboard) counts every member ALIVE."
    )
    Config: ClassVar[type[FleetConfig]] = FleetConfig
    uses_port: ClassVar[bool] = True

    def port(self, config: Any) -> int | None:
        return config.port  # type: ignore[no-any-return]

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        host = ctx.node.ip
        port = config.port
        return {
            "host": host,
            "port": port,
            "url": f"http://{url_host(host)}:{port}{NODES_PATH}",
            "members": [m.model_dump() for m in config.members],
            "started": config.started,
        }

    def describe(self, planned: dict[str, Any]) -> str:
        text = f"{len(planned['members'])} Ray node(s) ALIVE in {planned['url']}"
        if planned.get("started"):
            text = f"log matches /{planned['started']}/ and {text}"
        return text

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        cfg = target.config
        started = cfg.get("started")
        if started and not log_shows(target.log_path, target.log_offset, started):
            return ProbeResult(False, f"no line matching /{started}/ in {target.log_path} yet")
        doc, why = await get_json(cfg["host"], cfg["port"], NODES_PATH, attempt_timeout)
        if doc is None:
            return ProbeResult(False, f"the Ray head's node list {cfg['url']}: {why}")
        nodes = node_list(doc)
        if nodes is None:
            return ProbeResult(False, f"{cfg['url']} answered without a node list")
        return judge(cfg["members"], nodes)
