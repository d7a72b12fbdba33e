"""N sequential Echo invocations through signalrcore 1.0.2 on one transport, timed one by one.

Usage: python signalrcore_echo.py URL COUNT websockets|sse|long-polling
(prints one JSON line: client, transport, count, p50 and p99 in microseconds)
"""
import json
import logging
import sys
import threading
import time

from signalrcore.hub_connection_builder import HubConnectionBuilder
from signalrcore.types import HttpTransportType

TRANSPORTS = {
    "websockets": HttpTransportType.web_sockets,
    "sse": HttpTransportType.server_sent_events,
    "long-polling": HttpTransportType.long_polling,
}


def main() -> None:
    url, count, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    connection = (
        HubConnectionBuilder()
        .with_url(url, options={"transport": TRANSPORTS[transport]})
        .configure_logging(logging.CRITICAL)
        .build()
    )
    opened = threading.Event()
    connection.on_open(opened.set)
    connection.start()
    if not opened.wait(10):
        raise SystemExit("signalrcore did not connect over %s" % transport)

    def call(text: str) -> None:
        answered = threading.Event()
        result = {}

        def on_completion(message) -> None:
            result["value"] = message.result
            answered.set()

        connection.send("Echo", [text], on_invocation=on_completion)
        if not answered.wait(10):
            raise SystemExit("no answer to Echo over %s" % transport)
        if result["value"] != text:
            raise SystemExit("Echo returned %r for %r" % (result["value"], text))

    for index in range(50):
        call("warm-up %d" % index)
    samples = []
    for index in range(count):
        start = time.perf_counter_ns()
        call("echo %d" % index)
        samples.append((time.perf_counter_ns() - start) / 1000)
    connection.stop()
    samples.sort()

    def percentile(p: float) -> float:
        return samples[min(len(samples) - 1, int(p * len(samples)))]

    print(json.dumps({"client": "signalrcore", "transport": transport, "count": count,
                      "p50_us": round(percentile(0.5), 1), "p99_us": round(percentile(0.99), 1)}))


main()
