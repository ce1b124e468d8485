"""A job process that uses NATS the way Dynamo does: through ``NATS_SERVER`` only.

``payload BYTES``  connect, publish a message of BYTES to itself and receive it whole, then
                   round-trip one message through a JetStream stream; exit 0 when all of it
                   worked. Prints the server's ``max_payload`` so a test can read what the
                   server was configured with.
``refused BYTES``  exit 0 only if a message of BYTES is refused as over the server's limit.
"""

from __future__ import annotations

import asyncio
import os
import sys

import nats
from nats.aio.msg import Msg


async def payload(size: int) -> int:
    server = os.environ["NATS_SERVER"]
    nc = await nats.connect(server, connect_timeout=5, max_reconnect_attempts=0)
    print(f"connected to {server}: max_payload={nc.max_payload}", flush=True)
    got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def on_message(msg: Msg) -> None:
        if not got.done():
            got.set_result(msg.data)

    await nc.subscribe("srt.test.big", cb=on_message)
    await nc.publish("srt.test.big", b"x" * size)
    data = await asyncio.wait_for(got, 10)
    print(f"received {len(data)} bytes", flush=True)

    js = nc.jetstream()
    await js.add_stream(name="SRTTEST", subjects=["srt.js.>"])
    ack = await js.publish("srt.js.one", b"kept")
    sub = await js.pull_subscribe("srt.js.>", "reader")
    (msg,) = await sub.fetch(1, timeout=5)
    await msg.ack()
    print(f"jetstream stream={ack.stream} seq={ack.seq} data={msg.data.decode()}", flush=True)
    await nc.drain()
    return 0 if len(data) == size and msg.data == b"kept" else 1


async def refused(size: int) -> int:
    server = os.environ["NATS_SERVER"]
    nc = await nats.connect(server, connect_timeout=5, max_reconnect_attempts=0)
    print(f"connected to {server}: max_payload={nc.max_payload}", flush=True)
    try:
        await nc.publish("srt.test.big", b"x" * size)
    except nats.errors.MaxPayloadError:
        print(f"{size} bytes refused", flush=True)
        return 0
    finally:
        await nc.close()
    print(f"{size} bytes accepted", flush=True)
    return 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["payload"]:
        return asyncio.run(payload(int(argv[1])))
    if argv[:1] == ["refused"]:
        return asyncio.run(refused(int(argv[1])))
    print(f"unknown mode {argv!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
