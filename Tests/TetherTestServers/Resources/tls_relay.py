"""A TLS-terminating relay for the tests: TLS on 127.0.0.1:LISTEN, plaintext to 127.0.0.1:UPSTREAM.

Usage: python tls_relay.py CERT KEY LISTEN UPSTREAM
"""
import asyncio
import ssl
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def serve(client_reader, client_writer, upstream: int) -> None:
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))


async def main() -> None:
    cert, key, listen, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, upstream), "127.0.0.1", listen, ssl=context
    )
    print("listening 127.0.0.1:%d" % listen, flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
