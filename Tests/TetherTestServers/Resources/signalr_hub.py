"""The SignalR hub the tests run Tether against: aiosignalr 0.1.1 on 127.0.0.1.

Usage: python signalr_hub.py PORT [KEEP_ALIVE_SECONDS]
(prints "listening HOST:PORT" once it accepts connections; the keep-alive interval defaults to 1 s
so that tests can use short server timeouts)
"""
import asyncio
import sys

from aiosignalr.errors import HubException
from aiosignalr.server import Hub, IncomingStream, ServerOptions, SignalRServer


# Every value Tally was called with, in order (one list per server process).
TALLIED = []


# aiosignalr matches a hub method by the lower-cased name the client sends ("AddToGroup" →
# "addtogroup"), so the Python names are lower case without underscores.
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

    async def askclient(self, question: str) -> str:
        # A client result: the hub calls the client's "Answer" and returns what it replied.
        return await self.clients.caller.invoke("Answer", question)

    async def notifyme(self, text: str) -> None:
        await self.clients.caller.send("Notify", text)

    async def addtogroup(self, group) -> str:
        # A group name, or (as the README's app sends) {"PlatUserId": N} for the group "user-N";
        # a negative PlatUserId is refused, so that a test sees a failed join.
        if isinstance(group, dict):
            user = group.get("PlatUserId")
            if not isinstance(user, int) or user < 0:
                raise HubException("No such user: %r" % (user,))
            group = "user-%d" % user
        await self.groups.add(group)
        return group

    async def pushsaasmessage(self, user: int, message: dict) -> None:
        # What the README app's backend does: ReciveSaasMessage(ParamData) to the user's group.
        await self.clients.group("user-%d" % user).send("ReciveSaasMessage", message)

    async def sendtogroup(self, group: str, text: str) -> None:
        await self.clients.group(group).send("Notify", text)

    async def delay(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    async def broadcast(self, text: str) -> None:
        await self.clients.all_.send("Notify", text)

    async def tally(self, n: int) -> int:
        TALLIED.append(n)
        return n

    async def tallied(self) -> list:
        return TALLIED

    async def sumstream(self, stream: IncomingStream) -> int:
        total = 0
        async for item in stream:
            total += item
        return total


async def main() -> None:
    port = int(sys.argv[1])
    keep_alive = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    address = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    options = ServerOptions(
        keep_alive_interval=keep_alive, allow_stateful_reconnects=True, enable_detailed_errors=True
    )
    server = SignalRServer(TestHub, options=options)
    host, bound = await server.serve(address, port, path="/hub")
    print("listening %s:%d" % (host, bound), flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
