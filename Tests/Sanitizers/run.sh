#!/bin/sh
# Runs the tests that drive real servers (the Dispatch driver and the `tether` CLI against prosody
# and aiosignalr, the TLS client against a throw-away CA) under ThreadSanitizer and
# AddressSanitizer, each in its own
# build directory (.build/tsan, .build/asan), one test at a time (several at once under the
# sanitizers' slowdown on two cores made timing-sensitive expectations flaky). Fails on a test
# failure or on any report.
#
#   Tests/Sanitizers/run.sh [thread|address]...     (default: both)
#
# LeakSanitizer is off: XCTest's XCTMain keeps 144 bytes for the life of the process.
# Suppressions: Tests/Sanitizers/tsan-suppressions.txt (none now; each one explained there).
set -eu
cd "$(dirname "$0")/../.."
filter="TetherDispatchTests|TetherTLSTests|TetherCLITests|SharedNameTableTests|SpareBuilderTests"
failed=""
for sanitizer in ${*:-thread address}; do
    case $sanitizer in
    thread) scratch=.build/tsan ;;
    address) scratch=.build/asan ;;
    *) echo "unknown sanitizer: $sanitizer" >&2; exit 2 ;;
    esac
    swift build --build-tests --scratch-path "$scratch" --sanitize="$sanitizer" 2>&1 | grep -E "error:|warning:" || true
    log=$scratch/sanitized-tests.log
    status=0
    TSAN_OPTIONS="suppressions=$PWD/Tests/Sanitizers/tsan-suppressions.txt" ASAN_OPTIONS=detect_leaks=0 \
        swift test --skip-build --no-parallel --scratch-path "$scratch" --sanitize="$sanitizer" --filter "$filter" \
        >"$log" 2>&1 \
        || status=$?
    reports=$(grep -cE "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log" || true)
    summary=$(grep -E "Test run with" "$log" | tail -1 || true)
    echo "$sanitizer: ${summary:-no test summary}; $reports report(s); exit $status"
    if [ "$status" -ne 0 ] || [ "$reports" -ne 0 ]; then
        failed="$failed $sanitizer"
        grep -E -A30 "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log" | head -60 >&2 || true
        grep -E "✘" "$log" | head -20 >&2 || true
    fi
done
if [ -n "$failed" ]; then
    echo "sanitized real-server tests failed under:$failed (logs in .build/{tsan,asan}/sanitized-tests.log)" >&2
    exit 1
fi
