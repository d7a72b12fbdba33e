#!/bin/sh
# The real-time soak: XMPPClient on a real prosody (two users, stream management) and
# HubConnection on a real aiosignalr hub (stateful reconnect), side by side, with steady traffic
# through relays that cut every link on a schedule. Prints messages sent, received, lost and
# duplicated per protocol; fails unless lost and duplicated are 0.
#
#   Tests/Soak/run.sh [SECONDS] [CUT_EVERY_SECONDS]     (default: 600 and 30)
#
# The servers are started and stopped by the test (prosody from apt, aiosignalr from the
# virtual environment .ci/run makes in .build/venv-aiosignalr).
set -eu
cd "$(dirname "$0")/../.."
seconds=${1:-600}
cut=${2:-30}
swift build --build-tests 2>&1 | grep -E "error:|warning:" || true
log=.build/soak.log
status=0
TETHER_SOAK_SECONDS=$seconds TETHER_SOAK_CUT_SECONDS=$cut \
    swift test --skip-build --filter SoakTests >"$log" 2>&1 || status=$?
grep -E "^soak " "$log" || true
grep -E "✘" "$log" | head -20 >&2 || true
[ "$status" -eq 0 ] || { echo "the soak failed (log: $log)" >&2; exit 1; }
echo "soak passed: $seconds s, a cut every $cut s"
