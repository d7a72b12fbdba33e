"""N sequential Echo invocations through pysignalr 1.3.3, timed one by one.

Usage: python pysignalr_echo.py URL COUNT   (prints one JSON line: count, p50 and p99 in microseconds)
"""
import asyncio
import json
import sys
import time

from pysignalr.client import SignalRClient


async def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    client = SignalRClient(url)
    loop = asyncio.get_running_loop()
    opened = loop.create_future()

    async def on_open() -> None:
        if not opened.done():
            opened.set_result(None)

    client.on_open(on_open)
    runner = asyncio.create_task(client.run())
    await asyncio.wait_for(opened, 10)

    async def call(text: str) -> None:
        answered = loop.create_future()

        async def on_completion(message) -> None:
            if not answered.done():
                answered.set_result(message)

        await client.send("Echo", [text], on_invocation=on_completion)
        message = await asyncio.wait_for(answered, 10)
        if message.result != text:
            raise SystemExit("Echo returned %r for %r" % (message.result, text))

    for index in range(50):
        await call("warm-up %d" % index)
    samples = []
    for index in range(count):
        start = time.perf_counter_ns()
        await call("echo %d" % index)
        samples.append((time.perf_counter_ns() - start) / 1000)
    runner.cancel()
    try:
        await runner
    except BaseException:
        pass
    samples.sort()

    def percentile(p: float) -> float:
        return samples[min(len(samples) - 1, int(p * len(samples)))]

    print(json.dumps({"client": "pysignalr", "count": count, "p50_us": round(percentile(0.5), 1),
                      "p99_us": round(percentile(0.99), 1)}))


asyncio.run(main())
