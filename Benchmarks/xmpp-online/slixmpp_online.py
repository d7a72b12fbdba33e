"""The slixmpp side of Benchmarks/xmpp-online/run.sh: COUNT logins through the slow relay
(cleartext, SCRAM allowed on it, stream management on, the roster asked for and presence sent at
session start, as slixmpp's examples do), each followed by a cut of the link (a connection to the
relay's control port) and a resumption (the script reconnects at once; slixmpp resumes). Prints one
JSON line with the median times.

    python slixmpp_online.py HOST PORT JID PASSWORD CONTROL_PORT COUNT
"""
import asyncio
import json
import logging
import os
import socket
import statistics
import sys
import time

import slixmpp


def main():
    if os.environ.get("SLIXMPP_DEBUG"):
        logging.basicConfig(level=logging.DEBUG)
    host, port, jid, password, control_port, count = sys.argv[1:7]
    port, control_port, count = int(port), int(control_port), int(count)
    logins, resumptions = [], []

    async def one_round():
        client = slixmpp.ClientXMPP(
            jid, password, plugin_config={"feature_mechanisms": {"unencrypted_scram": True, "unencrypted_plain": False}}
        )
        client.register_plugin("xep_0198")
        client.register_plugin("xep_0199")
        online = asyncio.Event()
        enabled = asyncio.Event()
        resumed = asyncio.Event()

        async def session_start(_):
            client.send_presence()
            await client.get_roster()

        client.add_event_handler("session_start", session_start)
        client.add_event_handler("session_start", lambda _: online.set())
        client.add_event_handler("sm_enabled", lambda _: enabled.set())
        client.add_event_handler("session_resumed", lambda _: resumed.set())
        begin = time.monotonic()
        client.enable_plaintext = True
        client.enable_starttls = False
        client.enable_direct_tls = False
        client.connect(host, port)
        await asyncio.wait_for(online.wait(), 20)
        logins.append((time.monotonic() - begin) * 1000)
        await asyncio.wait_for(enabled.wait(), 20)
        await asyncio.sleep(0.3)
        # slixmpp does not reconnect by itself after a lost connection: reconnect at once, and
        # XEP-0198 resumes the session.
        def reconnect(_):
            client.connect(host, port)

        client.add_event_handler("disconnected", reconnect)
        cut_at = time.monotonic()
        socket.create_connection(("127.0.0.1", control_port)).close()
        await asyncio.wait_for(resumed.wait(), 20)
        resumptions.append((time.monotonic() - cut_at) * 1000)
        client.del_event_handler("disconnected", reconnect)
        client.disconnect()
        await asyncio.sleep(0.2)

    async def run():
        for _ in range(count):
            await one_round()

    asyncio.run(run())
    print(json.dumps({
        "client": "slixmpp " + slixmpp.__version__, "count": count,
        "login_ms": round(statistics.median_low(logins), 1),
        "resume_ms": round(statistics.median_low(resumptions), 1),
    }))


if __name__ == "__main__":
    main()
