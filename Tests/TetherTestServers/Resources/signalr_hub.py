"""The SignalR hub the tests run Tether against: aiosignalr 0.1.1 on 127.0.0.1.

Usage: python signalr_hub.py PORT   (prints "listening HOST:PORT" once it accepts connections)
"""
import asyncio
import sys

from aiosignalr.errors import HubException
from aiosignalr.server import Hub, IncomingStream, ServerOptions, SignalRServer


class TestHub(Hub):
    async def echo(self, text: str) -> str:
        return text

    async def add(self, a: int, b: int) -> int:
        return a + b

    async def counter(self, n: int):
        for i in range(n):
            yield i
            await asyncio.sleep(0.002)

    async def fail(self, text: str) -> str:
        raise HubException(text)

    async def ask_client(self, question: str) -> str:
        # A client result: the hub calls the client's "Answer" and returns what it replied.
        return await self.clients.caller.invoke("Answer", question)

    async def notify_me(self, text: str) -> None:
        await self.clients.caller.send("Notify", text)

    async def add_to_group(self, group: str) -> str:
        await self.groups.add(group)
        return group

    async def send_to_group(self, group: str, text: str) -> None:
        await self.clients.group(group).send("Notify", text)

    async def sum_stream(self, stream: IncomingStream) -> int:
        total = 0
        async for item in stream:
            total += item
        return total


async def main() -> None:
    port = int(sys.argv[1])
    options = ServerOptions(allow_stateful_reconnects=True, enable_detailed_errors=True)
    server = SignalRServer(TestHub, options=options)
    host, bound = await server.serve("127.0.0.1", port, path="/hub")
    print("listening %s:%d" % (host, bound), flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
