#!/usr/bin/env bash
# Time to online through a slow link: XMPPClient, slixmpp (PyPI) and libstrophe (Debian's 0.12)
# log in to one local prosody through a relay that passes each chunk on 50 ms later each way (a
# 100 ms round trip), then the link is cut and each resumes its session (XEP-0198). Cleartext,
# SCRAM, stream management on, the roster and presence asked for as an app does. The clients run
# alternately, ROUNDS times each with COUNT logins per run; the medians of the best run are
# compared with the protocol's minimum (Specs/xmpp/client-machine.md, "Round trips": 5 round
# trips for a SCRAM login on cleartext, 5 for a resumption; the relay does not delay the TCP
# handshake, so that one is left out for every client).
#
# The same run also has XMPPClient log in the way current servers allow (neither slixmpp nor
# libstrophe speaks it): SASL2 with Bind 2 and stream management inside the login (XEP-0388,
# XEP-0386; 3 round trips for a login and for a resumption, cleartext), and over direct TLS 1.3
# (XEP-0368: 4 for a SCRAM login; 3 for a resumption with a FAST token, XEP-0484), against a
# second prosody 13 with the SASL2 modules from bookworm-backports and a throw-away certificate.
#
#   Benchmarks/xmpp-online/run.sh [COUNT] [ROUNDS]      (default: 5 and 2)
#
# Needs (installed when run as root): prosody 13 and prosody-modules (bookworm-backports, as
# Tests/run.sh installs them), lua-unbound, libstrophe-dev, gcc, pkg-config, python3-venv, openssl;
# slixmpp comes from PyPI into .build/venv-slixmpp. Everything is on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-5}
rounds=${2:-2}
delay=0.05

packages=(prosody prosody-modules lua-unbound libstrophe-dev gcc pkg-config python3-venv openssl)
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
venv=.build/venv-slixmpp
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
"$venv/bin/python" -c 'import slixmpp' 2>/dev/null || "$venv/bin/pip" install --quiet --disable-pip-version-check slixmpp

work=$(mktemp -d "${TMPDIR:-/tmp}/tether-xmpp-online.XXXXXX")
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
relay_port=$(free_port)
control_port=$(free_port)
modern_port=$(free_port)
modern_tls_port=$(free_port)
modern_relay_port=$(free_port)
modern_control_port=$(free_port)
modern_tls_relay_port=$(free_port)
modern_tls_control_port=$(free_port)
pids=()
cleanup() {
    # Bounded: TERM, then KILL after 5 s (a server busy closing connections can outlive a TERM).
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" -eq 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/data"
cat >"$work/prosody.cfg.lua" <<EOF2
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
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "posix"; }
modules_disabled = { "s2s"; "offline"; "tls"; }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
log = { { levels = { min = "error" }, to = "file", filename = "$work/prosody.log" } }
VirtualHost "localhost"
EOF2
prosodyctl --config "$work/prosody.cfg.lua" register alice localhost benchpass >/dev/null
prosody -F --config "$work/prosody.cfg.lua" >"$work/console.log" 2>&1 &
pids+=($!)
python3 Benchmarks/xmpp-online/relay.py "$relay_port" "$port" "$control_port" "$delay" &
pids+=($!)

# The second prosody: SASL2, Bind 2, stream management and FAST inside the login, direct TLS with
# a certificate for localhost from a throw-away CA.
mkdir -p "$work/modern/data" "$work/modern/certs"
key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${key[@]}" -days 2 -subj "/CN=Tether bench CA" -keyout "$work/ca.key" -out "$work/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req "${key[@]}" -subj "/CN=localhost" -keyout "$work/modern/certs/localhost.key" \
    -out "$work/localhost.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' >"$work/server.ext"
openssl x509 -req -in "$work/localhost.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
    -out "$work/modern/certs/localhost.crt" -extfile "$work/server.ext" 2>/dev/null
cat >"$work/modern/prosody.cfg.lua" <<EOF2
run_as_root = true
data_path = "$work/modern/data"
pidfile = "$work/modern/prosody.pid"
plugin_paths = {}
admins = {}
interfaces = { "127.0.0.1" }
c2s_ports = { $modern_port }
c2s_direct_tls_ports = { $modern_tls_port }
s2s_ports = {}
http_ports = {}
https_ports = {}
certificates = "$work/modern/certs"
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "posix"; "tls"; "sasl2"; "sasl2_bind2"; "sasl2_sm"; "sasl2_fast"; }
modules_disabled = { "s2s"; "offline"; }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
log = { { levels = { min = "error" }, to = "file", filename = "$work/modern/prosody.log" } }
VirtualHost "localhost"
EOF2
prosodyctl --config "$work/modern/prosody.cfg.lua" register alice localhost benchpass >/dev/null
prosody -F --config "$work/modern/prosody.cfg.lua" >"$work/modern/console.log" 2>&1 &
pids+=($!)
python3 Benchmarks/xmpp-online/relay.py "$modern_relay_port" "$modern_port" "$modern_control_port" "$delay" &
pids+=($!)
python3 Benchmarks/xmpp-online/relay.py "$modern_tls_relay_port" "$modern_tls_port" "$modern_tls_control_port" "$delay" &
pids+=($!)
for _ in $(seq 200); do
    python3 -c "import socket; [socket.create_connection(('127.0.0.1', p), 1) for p in ($port, $relay_port, $modern_port, $modern_tls_port, $modern_relay_port, $modern_tls_relay_port)]" 2>/dev/null && break
    sleep 0.05
done

echo "building tether-bench (release) and the libstrophe harness…" >&2
swift build -c release --product tether-bench 2>&1 | grep -E "error|warning:" >&2 || true
bench=$(swift build -c release --show-bin-path)/tether-bench
gcc -O2 -o "$work/strophe_online" Benchmarks/xmpp-online/strophe_online.c $(pkg-config --cflags --libs libstrophe)
export TETHER_PASSWORD=benchpass
results="$work/results.jsonl"
: >"$results"
run() { # COMMAND...
    local line
    line=$("$@") || { echo "failed: $*" >&2; exit 1; }
    echo "$line" >&2
    echo "$line" >>"$results"
}
for round in $(seq "$rounds"); do
    echo "round $round of $rounds" >&2
    run "$bench" --xmpp online "127.0.0.1:$relay_port" alice@localhost/t "$control_port" "$count"
    run "$venv/bin/python" Benchmarks/xmpp-online/slixmpp_online.py 127.0.0.1 "$relay_port" alice@localhost/s benchpass "$control_port" "$count"
    run "$work/strophe_online" 127.0.0.1 "$relay_port" alice@localhost/l benchpass "$control_port" "$count"
    run "$bench" --xmpp online-sasl2 "127.0.0.1:$modern_relay_port" alice@localhost/t "$modern_control_port" "$count"
    run "$bench" --xmpp online-sasl2-tls "127.0.0.1:$modern_tls_relay_port" alice@localhost/t \
        "$modern_tls_control_port" "$work/ca.crt" "$count"
done

python3 - "$results" "$delay" <<'EOF2'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
rtt = 2 * float(sys.argv[2]) * 1000
best = {}
for r in rows:
    name = r["client"].split()[0] if not r["client"].startswith("tether") else r["client"]
    b = best.setdefault(name, dict(r))
    b["login_ms"] = min(b["login_ms"], r["login_ms"])
    b["resume_ms"] = min(b["resume_ms"], r["resume_ms"])
print(f"Time to online through a {rtt:.0f} ms round trip, same prosody, same run (median of each run, best run)")
for key, label, minimum in (("login_ms", "login (SCRAM)", 5), ("resume_ms", "resumption", 5)):
    floor = minimum * rtt
    t = best["tether"][key]
    line = f"  {label:16} minimum {floor:6.0f} ms   tether {t:6.0f} ms ({(t - floor) / rtt:+.2f} RTT)"
    for name in ("slixmpp", "libstrophe"):
        if name in best:
            line += f"   {name} {best[name][key]:6.0f} ms"
    print(line)
print("  targets: tether within one round trip of the minimum, and ahead of both")
print("Current logins (Tether only: slixmpp and libstrophe speak neither SASL2 nor FAST)")
for name, key, label, minimum in (
    ("tether-sasl2", "login_ms", "SASL2 + Bind 2 login (SCRAM)", 3),
    ("tether-sasl2", "resume_ms", "SASL2 resumption (SCRAM)", 3),
    ("tether-sasl2-tls", "login_ms", "direct TLS 1.3 SASL2 login (SCRAM)", 4),
    ("tether-sasl2-tls", "resume_ms", "direct TLS 1.3 FAST resumption", 3),
):
    floor = minimum * rtt
    t = best[name][key]
    verdict = "met" if t <= floor + 25 else "MISSED"
    print(f"  {label:36} minimum {floor:6.0f} ms   tether {t:6.0f} ms ({t - floor:+.0f} ms; target +25 ms: {verdict})")
EOF2
