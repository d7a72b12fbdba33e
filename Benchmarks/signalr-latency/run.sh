#!/usr/bin/env bash
# Round-trip latency per transport: the same sequential Echo invocations (1,000 by default;
# COUNT=N to change; RUNS=N runs of each client, default 2) against one local aiosignalr 0.1.1
# hub, every client in alternation (the machine is noisy; each client's best p50 and best p99
# count):
#   WebSockets:         Tether, the floor (the simplest raw client: prebuilt frames and a byte
#                       search, `tether-bench --echo-floor`), pysignalr 1.3.3, signalrcore 1.0.2
#   Server-Sent Events: Tether, signalrcore
#   long polling:       Tether, signalrcore
# Tether runs twice on each transport: with its default options, awaited from an ordinary task
# ("tether"), and from a task on the connection's executor ("tether-executor",
# `HubConnection.executor`). The targets hold for both: WebSockets p50 within 50 µs of the floor;
# on each transport Tether's p99 no worse than the best peer's; Server-Sent Events and long
# polling p50 ≤ 0.5× signalrcore's.
#
# Needs python3 with venv and PyPI access the first time (it makes .build/venv-aiosignalr,
# .build/venv-pysignalr and .build/venv-signalrcore).
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${COUNT:-1000}
rounds=${RUNS:-2}

for pair in aiosignalr:aiosignalr==0.1.1 pysignalr:pysignalr==1.3.3 signalrcore:signalrcore==1.0.2; do
    venv=.build/venv-${pair%%:*}
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p .build && python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${pair#*:}"
done
swift build -c release --product tether-bench >&2

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
# The hub's keep-alive at 15 s (aiosignalr's default), as a production hub's.
.build/venv-aiosignalr/bin/python -u Tests/TetherTestServers/Resources/signalr_hub.py "$port" 15 >"$log" 2>&1 &
hub=$!
trap 'kill $hub 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
    grep -q listening "$log" && break
    sleep 0.1
done
grep -q listening "$log" || { cat "$log" >&2; exit 1; }
url="http://127.0.0.1:$port/hub"

runs=()
for _ in $(seq "$rounds"); do
    runs+=("$(.build/release/tether-bench --echo-floor "$url" --count "$count")")
    for transport in websockets sse long-polling; do
        runs+=("$(.build/release/tether-bench --echo-latency "$url" --count "$count" --transport "$transport")")
        runs+=("$(.build/release/tether-bench --echo-latency "$url" --count "$count" --transport "$transport" --executor)")
        runs+=("$(.build/venv-signalrcore/bin/python Benchmarks/signalr-latency/signalrcore_echo.py "$url" "$count" "$transport")")
    done
    runs+=("$(.build/venv-pysignalr/bin/python Benchmarks/signalr-latency/pysignalr_echo.py "$url" "$count")")
done

python3 - "${runs[@]}" <<'PY'
import json, sys
runs = [json.loads(line) for line in sys.argv[1:]]
best = {}
for run in runs:
    key = (run["client"], run.get("transport", "websockets"))
    entry = best.setdefault(key, {"p50_us": run["p50_us"], "p99_us": run["p99_us"]})
    entry["p50_us"] = min(entry["p50_us"], run["p50_us"])
    entry["p99_us"] = min(entry["p99_us"], run["p99_us"])
count = runs[0]["count"]
print("%d sequential Echo invocations against aiosignalr 0.1.1 on 127.0.0.1 (best p50 and p99 of the runs)" % count)
print("%-14s %-16s %10s %10s" % ("transport", "client", "p50 (µs)", "p99 (µs)"))
order = ["floor", "tether", "tether-executor", "pysignalr", "signalrcore"]
for transport in ["websockets", "sse", "long-polling"]:
    for client in order:
        if (client, transport) in best:
            row = best[(client, transport)]
            print("%-14s %-16s %10.1f %10.1f" % (transport, client, row["p50_us"], row["p99_us"]))
def verdict(ok):
    return "met" if ok else "NOT met"
floor = best[("floor", "websockets")]
for tether in ["tether", "tether-executor"]:
    gap = best[(tether, "websockets")]["p50_us"] - floor["p50_us"]
    print("%s: WebSockets p50 above the floor: %.1f µs (target ≤ 50: %s)" % (tether, gap, verdict(gap <= 50)))
    for transport in ["websockets", "sse", "long-polling"]:
        peers = [best[(c, transport)]["p99_us"] for c in ("pysignalr", "signalrcore") if (c, transport) in best]
        mine = best[(tether, transport)]["p99_us"]
        print("%s: %s p99 / best peer's: %.2f (target ≤ 1.00: %s)" % (tether, transport, mine / min(peers), verdict(mine <= min(peers))))
    for transport in ["sse", "long-polling"]:
        ratio = best[(tether, transport)]["p50_us"] / best[("signalrcore", transport)]["p50_us"]
        print("%s: %s p50 / signalrcore's: %.2f (target ≤ 0.50: %s)" % (tether, transport, ratio, verdict(ratio <= 0.5)))
PY
