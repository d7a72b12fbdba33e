"""A TCP relay on 127.0.0.1 that passes each chunk on DELAY seconds after it arrived, each way (a
long link), for Benchmarks/xmpp-online/run.sh. A connection to CONTROL_PORT cuts every relayed
connection at once (both sides closed, as when a network drops). The TCP handshake itself is not
delayed (the kernel completes it), so the link's round trips are those of the bytes.

    python3 relay.py LISTEN_PORT UPSTREAM_PORT CONTROL_PORT DELAY_SECONDS
"""
import asyncio
import sys


async def main(listen_port, upstream_port, control_port, delay):
    loop = asyncio.get_running_loop()
    pairs = set()

    async def pump(reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                # Same delay for every chunk: call_later keeps their order.
                loop.call_later(delay, lambda d=data: writer.is_closing() or writer.write(d))
        except (ConnectionError, asyncio.CancelledError):
            pass
        await asyncio.sleep(delay)
        writer.close()

    async def relay(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_writer.close()
            return
        pair = (client_writer, server_writer)
        pairs.add(pair)
        await asyncio.gather(pump(client_reader, server_writer), pump(server_reader, client_writer))
        pairs.discard(pair)

    async def control(reader, writer):
        for client_writer, server_writer in list(pairs):
            for w in (client_writer, server_writer):
                w.transport.abort()
        pairs.clear()
        writer.close()

    relay_server = await asyncio.start_server(relay, "127.0.0.1", listen_port)
    control_server = await asyncio.start_server(control, "127.0.0.1", control_port)
    async with relay_server, control_server:
        await asyncio.gather(relay_server.serve_forever(), control_server.serve_forever())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
