#!/usr/bin/env bash
# XMPPClient (the Dispatch driver) against libstrophe (Debian's libstrophe 0.12), on one local
# prosody, in the same run: sequential pings (p50, p99; the same stanza from both; Tether's also
# from a task on the client's executor and each from the last one's completion, as libstrophe's
# harness runs on its connection's one thread; each ping row split into the client's own part and
# the waiting, and the process's CPU time per ping), 10,000 messages from one
# account to another without and with stream management (messages/s; Tether's also sent from a
# task on the client's executor; both clients send the same stanzas: an initial presence, an id on
# every message), and many idle connections
# in one process (resident memory and live heap per connection beyond a first one, threads,
# descriptors; Tether's release their parser buffers after 250 ms of quiet). Each round runs the
# four ping harnesses side by side, taking turns of PING_BATCH pings (default 50; turns.py), and
# the per-message rows one after another; ROUNDS rounds, the best of each client's rounds is
# compared, and each round's ratios are printed beside it (paired: the same minutes; for the
# message rows, the same few seconds), with how busy prosody was during the message rows (near
# 100 %, the rate is the server's, whichever client sends).
#
#   Benchmarks/xmpp-driver/run.sh [IDLE_COUNT] [ROUNDS]      (default: 10000 and 3; PINGS=N
#                                                             pings per round, default 5000)
#
# BASELINE=PATH (another build's tether-bench) adds its three ping rows to every round's turns and
# prints each round's ratio of this build to it: a change measured against the build before it
# in the same seconds, e.g.
#   git worktree add /tmp/tether-base HEAD~1 && swift build -c release --product tether-bench \
#       --package-path /tmp/tether-base
#   BASELINE=/tmp/tether-base/.build/release/tether-bench Benchmarks/xmpp-driver/run.sh 1000 3
# MESSAGE_BATCH=N runs the message rows side by side in turns of N messages (below).
#
# libstrophe's event loop uses select(), so its idle row stops at 1,000 connections; Tether's runs
# at 1,000 (side by side) and at IDLE_COUNT. Needs (installed when run as root): prosody,
# lua-unbound, libstrophe-dev, gcc, pkg-config. Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
idle=${1:-10000}
rounds=${2:-3}
# Pings per round and client: with 1,000, one client's best p50 moved by 10 % and its best p99 by
# 50 % between two runs on these machines; more pings steady both.
pings=${PINGS:-5000}

packages=(prosody lua-unbound libstrophe-dev gcc pkg-config)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        # A fresh machine has no package lists yet.
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "missing: ${missing[*]} (sudo apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi

# Room for IDLE_COUNT connections in each process (the clients' and prosody's).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" -lt $((idle + 200)) ]; then
    echo "the open-file limit ($(ulimit -n)) is too low for $idle connections" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tether-xmpp-driver.XXXXXX")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
prosody_pid=""
cleanup() {
    if [ -n "$prosody_pid" ]; then
        # prosody busy with thousands of closing connections can outlive a TERM (it went on at
        # 80 % CPU after the script ended, slowing everything after it): KILL after 5 s.
        kill "$prosody_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$prosody_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$prosody_pid" 2>/dev/null || true
        wait "$prosody_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data"
cat >"$work/prosody.cfg.lua" <<EOF
run_as_root = true
data_path = "$work/data"
pidfile = "$work/prosody.pid"
plugin_paths = {}
admins = {}
interfaces = { "127.0.0.1" }
c2s_ports = { $port }
c2s_direct_tls_ports = {}
s2s_ports = {}
http_ports = {}
https_ports = {}
network_backend = "epoll"
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "posix"; }
modules_disabled = { "s2s"; "offline"; "tls"; }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
log = { { levels = { min = "error" }, to = "file", filename = "$work/prosody.log" } }
VirtualHost "localhost"
EOF
for user in alice bob; do
    prosodyctl --config "$work/prosody.cfg.lua" register "$user" localhost benchpass >/dev/null
done
prosody -F --config "$work/prosody.cfg.lua" >"$work/console.log" 2>&1 &
prosody_pid=$!
for _ in $(seq 200); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
    sleep 0.05
done

echo "building tether-bench (release) and the libstrophe harness…" >&2
swift build -c release --product tether-bench 2>&1 | grep -E "error|warning:" >&2 || true
bench=$(swift build -c release --show-bin-path)/tether-bench
gcc -O2 -o "$work/strophe_bench" Benchmarks/xmpp-driver/strophe_bench.c $(pkg-config --cflags --libs libstrophe)
strophe="$work/strophe_bench"
gcc -O2 -shared -fPIC -o "$work/turnaround.so" Benchmarks/xmpp-driver/turnaround.c -ldl
export TETHER_PASSWORD=benchpass
# The message harnesses print how busy prosody was during their timed part (server_busy: its
# threads' time on a processor over the time measured); near 1, the rate is prosody's.
export BENCH_SERVER_PID=$prosody_pid
results="$work/results.jsonl"
: >"$results"
# Rows run inside a round carry its number (round_field), so that their ratios can be paired.
round_field=""
run() { # ROW COMMAND...
    local row=$1
    shift
    local line
    line=$("$@") || { echo "failed: $*" >&2; exit 1; }
    echo "$line" >&2
    echo "{\"row\":\"$row\",$round_field${line#\{}" >>"$results"
}

# The ping rows of a round: the four harnesses side by side, taking turns of $batch pings
# (turns.py), so that every client's samples come from the same minutes of a noisy host; each run
# with turnaround.c loaded, its line getting the client's own part of a round trip (from the wait
# that returned with the answer to the next ping's send) and the waiting (from that send to the
# next input), timed the same way in both clients.
# Batches of 50 pair more tightly than of 250: in the same noisy hour, a build against itself
# (BASELINE) gave per-round p50 ratios of 0.966–1.014 with 50 and 0.928–1.062 with 250.
batch=${PING_BATCH:-50}
baseline=${BASELINE:-}
if [ -n "$baseline" ] && [ ! -x "$baseline" ]; then
    echo "BASELINE is not an executable: $baseline" >&2
    exit 1
fi
run_pings() {
    local lines
    local extra=()
    if [ -n "$baseline" ]; then
        extra=(-- "$baseline" --xmpp latency "127.0.0.1:$port" alice@localhost/bt "$pings"
            -- "$baseline" --xmpp latency-executor "127.0.0.1:$port" alice@localhost/be "$pings"
            -- "$baseline" --xmpp latency-callback "127.0.0.1:$port" alice@localhost/bc "$pings")
    fi
    lines=$(TURNAROUND_SO="$work/turnaround.so" python3 Benchmarks/xmpp-driver/turns.py "$batch" "$work" \
        -- "$bench" --xmpp latency "127.0.0.1:$port" alice@localhost/lt "$pings" \
        -- "$bench" --xmpp latency-executor "127.0.0.1:$port" alice@localhost/le "$pings" \
        -- "$bench" --xmpp latency-callback "127.0.0.1:$port" alice@localhost/lc "$pings" \
        -- "$strophe" latency 127.0.0.1 "$port" alice@localhost/ls benchpass "$pings" "${extra[@]}") ||
        { echo "failed: the ping rows" >&2; exit 1; }
    # The baseline's lines (after libstrophe's) name their clients "baseline-…".
    lines=$(echo "$lines" | sed '5,$s/"client":"/"client":"baseline-/')
    echo "$lines" >&2
    echo "$lines" | sed "s/^{/{\"row\":\"latency\",\"round\":$round,/" >>"$results"
}

# The message rows of a round (ROW: throughput or throughput-sm): one after another, each one burst
# of 10,000 (the issue's measure); with MESSAGE_BATCH=N side by side instead, taking turns of N
# messages, each batch timed from its first send to its last arrival (paired, but every batch's
# end is a burst's end: see Specs/performance.md, "The end of a burst").
message_batch=${MESSAGE_BATCH:-}
run_messages() { # ROW
    local row=$1 mode=${1/throughput/}
    if [ -z "$message_batch" ]; then
        run "$row" "$bench" --xmpp "$row" "127.0.0.1:$port" alice@localhost/tt bob@localhost/tr 10000
        run "$row" "$bench" --xmpp "$row-executor" "127.0.0.1:$port" alice@localhost/tt bob@localhost/tr 10000
        run "$row" "$strophe" "$row" 127.0.0.1 "$port" alice@localhost/st bob@localhost/sr benchpass 10000
        return
    fi
    local lines
    lines=$(python3 Benchmarks/xmpp-driver/turns.py "$message_batch" "$work" \
        -- "$bench" --xmpp "$row" "127.0.0.1:$port" "alice@localhost/tt$mode" "bob@localhost/tr$mode" 10000 \
        -- "$bench" --xmpp "$row-executor" "127.0.0.1:$port" "alice@localhost/te$mode" "bob@localhost/re$mode" 10000 \
        -- "$strophe" "$row" 127.0.0.1 "$port" "alice@localhost/st$mode" "bob@localhost/sr$mode" benchpass 10000) ||
        { echo "failed: the $row rows" >&2; exit 1; }
    echo "$lines" >&2
    echo "$lines" | sed "s/^{/{\"row\":\"$row\",\"round\":$round,/" >>"$results"
}

for round in $(seq "$rounds"); do
    echo "round $round of $rounds" >&2
    round_field="\"round\":$round,"
    run_pings
    run_messages throughput
    run_messages throughput-sm
done
round_field=""
run idle-1000 "$strophe" idle 127.0.0.1 "$port" bob@localhost benchpass 1000
run idle-1000 "$bench" --xmpp idle "127.0.0.1:$port" bob@localhost 1000
if [ "$idle" -gt 1000 ]; then run "idle-$idle" "$bench" --xmpp idle "127.0.0.1:$port" bob@localhost "$idle"; fi

python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def best(row, client, key, lower):
    values = [r[key] for r in rows if r["row"] == row and r["client"] == client]
    return (min if lower else max)(values) if values else None
print("XMPPClient vs libstrophe, same prosody, same run (best of the rounds)")
def round_ratios(client, key, against="libstrophe"):
    """Each round's ratio to `against`'s: the pings of a round took turns, so these are paired."""
    ours = {r["round"]: r[key] for r in rows if r["row"] == "latency" and r["client"] == client}
    theirs = {r["round"]: r[key] for r in rows if r["row"] == "latency" and r["client"] == against}
    return [ours[n] / theirs[n] for n in sorted(ours) if n in theirs]
for client, name in (("tether", "tether"), ("tether-executor", "on executor"), ("tether-callback", "callback")):
    for key, label in (("p50_us", "ping p50 (µs)"), ("p99_us", "ping p99 (µs)")):
        t, s = best("latency", client, key, True), best("latency", "libstrophe", key, True)
        paired = " ".join(f"{ratio:.3f}" for ratio in round_ratios(client, key))
        print(f"  {label:28} {name:11} {t:10.1f}   libstrophe {s:10.1f}   ratio {t / s:.2f} (≤ 1 is the target)"
              f"   each round {paired}")
if any(r["client"].startswith("baseline-") for r in rows):
    print("This build against BASELINE, the same turns (p50 / p99 ratio, each round; < 1: this one is faster):")
    for client, name in (("tether", "tether"), ("tether-executor", "on executor"), ("tether-callback", "callback")):
        p50, p99 = (" ".join(f"{ratio:.3f}" for ratio in round_ratios(client, key, "baseline-" + client))
                    for key in ("p50_us", "p99_us"))
        print(f"  {name:11}  p50 {p50}   p99 {p99}")
print("Where a ping's time goes (turnaround.c: the same wrappers in both clients; median of the rounds):")
print("  own part: from the wait that returned with the answer to the next ping's send; waiting:")
print("  from that send to the next input (server, kernel, wake-up); CPU: the process's, per ping")
def median(row, client, key):
    values = sorted(r[key] for r in rows if r["row"] == row and r["client"] == client)
    return values[len(values) // 2]
for client, name in (("tether", "tether"), ("tether-executor", "on executor"), ("tether-callback", "callback"),
                     ("libstrophe", "libstrophe")):
    own, waiting, cpu = (median("latency", client, key) for key in ("turnaround_p50_us", "waiting_p50_us", "cpu_us_per_ping"))
    print(f"  {name:11}  own part p50 {own:6.1f} µs   waiting p50 {waiting:6.1f} µs   CPU {cpu:6.1f} µs per ping")
def paired(row, client, key):
    ours = {r["round"]: r[key] for r in rows if r["row"] == row and r["client"] == client and "round" in r}
    theirs = {r["round"]: r[key] for r in rows if r["row"] == row and r["client"] == "libstrophe" and "round" in r}
    ratios = [ours[n] / theirs[n] for n in sorted(ours) if n in theirs]
    return ("   each round " + " ".join(f"{ratio:.3f}" for ratio in ratios)) if ratios else ""
for row, label in (("throughput", "10,000 messages (msg/s)"), ("throughput-sm", "the same with SM (msg/s)")):
    for client, name in (("tether", "tether"), ("tether-executor", "on executor")):
        t, s = best(row, client, "messages_per_s", False), best(row, "libstrophe", "messages_per_s", False)
        print(f"  {label:28} {name:11} {t:10.0f}   libstrophe {s:10.0f}   ratio {t / s:.2f} (≥ 1 is the target)"
              + paired(row, client, "messages_per_s"))
    busy = {client: [r["server_busy"] for r in rows if r["row"] == row and r["client"] == client
                     and r.get("server_busy", -1) >= 0]
            for client in ("tether", "tether-executor", "libstrophe")}
    if all(busy.values()):
        shares = ", ".join(f"{name} {min(values) * 100:.0f}–{max(values) * 100:.0f} %" for name, values in
                           zip(("tether", "on executor", "libstrophe"), busy.values()))
        print(f"    prosody busy during these rows (its time on a processor over the time measured): {shares}")
for r in rows:
    if r["row"].startswith("idle"):
        print(f"  {r['row']:12} {r['client']:10} {r['rss_per_connection'] / 1024:6.1f} KiB resident/connection, "
              f"{r['heap_per_connection'] / 1024:6.1f} KiB heap/connection, {r['threads']} threads, "
              f"{r['descriptors']} descriptors")
EOF
