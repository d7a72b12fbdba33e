#!/usr/bin/env bash
# Round-trip latency of Tether against the Python client pysignalr: the same sequential Echo
# invocations (1,000 by default; COUNT=N to change) against one local aiosignalr 0.1.1 hub, each
# client twice in alternation (the machine is noisy; each client's better run counts). Prints
# p50/p99 for each and the ratio. Target: Tether's p50 ≤ 0.5× pysignalr's.
#
# Needs python3 with venv and PyPI access the first time (it makes .build/venv-aiosignalr and
# .build/venv-pysignalr).
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${COUNT:-1000}

if [ ! -x .build/venv-aiosignalr/bin/python ]; then
    mkdir -p .build && python3 -m venv .build/venv-aiosignalr
fi
.build/venv-aiosignalr/bin/pip install --quiet --disable-pip-version-check aiosignalr==0.1.1
if [ ! -x .build/venv-pysignalr/bin/python ]; then
    mkdir -p .build && python3 -m venv .build/venv-pysignalr
fi
.build/venv-pysignalr/bin/pip install --quiet --disable-pip-version-check pysignalr==1.3.3
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
for _ in 1 2; do
    runs+=("$(.build/release/tether-bench --echo-latency "$url" --count "$count")")
    runs+=("$(.build/venv-pysignalr/bin/python Benchmarks/signalr-latency/pysignalr_echo.py "$url" "$count")")
done

python3 - "${runs[@]}" <<'PY'
import json, sys
runs = [json.loads(line) for line in sys.argv[1:]]
best = {}
for run in runs:
    previous = best.get(run["client"])
    if previous is None or run["p50_us"] < previous["p50_us"]:
        best[run["client"]] = run
tether, python = best["tether"], best["pysignalr"]
print("%d sequential Echo invocations against aiosignalr 0.1.1 on 127.0.0.1 (better of 2 runs each)" % tether["count"])
print("%-10s %10s %10s" % ("client", "p50 (µs)", "p99 (µs)"))
for run in (tether, python):
    print("%-10s %10.1f %10.1f" % (run["client"], run["p50_us"], run["p99_us"]))
ratio = tether["p50_us"] / python["p50_us"]
print("p50 ratio tether/pysignalr: %.2f (target ≤ 0.50: %s)" % (ratio, "met" if ratio <= 0.5 else "NOT met"))
print("p99 ratio tether/pysignalr: %.2f" % (tether["p99_us"] / python["p99_us"]))
PY
