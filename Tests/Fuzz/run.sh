#!/bin/sh
# Runs every libFuzzer target (or the ones named) for SECONDS each with AddressSanitizer, starting
# from the committed seeds, and prints executions per target. Fails if any target finds a crash, a
# hang (an input over 10 s), a leak of memory past libFuzzer's RSS limit or a broken invariant; the
# input that did it is saved in .build/fuzz-artifacts/TARGET/ (turn it into a regression test).
#
#   Tests/Fuzz/run.sh [SECONDS] [TARGET...]        (default: 30 seconds, every target)
#
# Builds with the fuzzer and address sanitizers in .build/fuzz (apart from the ordinary builds).
# The corpus grows in .build/fuzz-corpus/TARGET, so that later runs start where earlier ones
# stopped; delete it to start from the seeds again.
set -eu
cd "$(dirname "$0")/../.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
all="FuzzJSONHubProtocol FuzzMessagePackHubProtocol FuzzJSONValue FuzzMessagePackValue FuzzHandshakeNegotiate
FuzzXMLStream FuzzSCRAM FuzzWebSocket FuzzHTTPResponse FuzzServerSentEvents FuzzHTTPTransport FuzzDNSMessage FuzzDNSResolver
FuzzTLSRecords FuzzHubConnection FuzzXMPPClient"
targets=${*:-$all}

for target in $targets; do
    swift build -c release --scratch-path .build/fuzz --sanitize=fuzzer \
        -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address --product "$target" \
        2>&1 | grep -E "error:|warning:" || true
    [ -x ".build/fuzz/release/$target" ] || { echo "$target did not build" >&2; exit 1; }
done

failed=""
summary=""
for target in $targets; do
    corpus=.build/fuzz-corpus/$target
    artifacts=.build/fuzz-artifacts/$target
    mkdir -p "$corpus" "$artifacts"
    if [ -d "Tests/Fuzz/Seeds/$target" ]; then cp -n Tests/Fuzz/Seeds/"$target"/* "$corpus"/ 2>/dev/null || true; fi
    dictionary=""
    if [ -f "Tests/Fuzz/Seeds/$target.dict" ]; then dictionary="-dict=Tests/Fuzz/Seeds/$target.dict"; fi
    log=.build/fuzz-artifacts/$target.log
    # LeakSanitizer is off: the Swift runtime's caches live for the whole process.
    if SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 ".build/fuzz/release/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" $dictionary "$corpus" >"$log" 2>&1; then
        verdict=ok
    else
        verdict=FAILED
        failed="$failed $target"
        grep -E "invariant broken|ERROR|SUMMARY|Fatal error|Test unit written" "$log" | head -5 >&2 || true
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    coverage=$(grep -oE "cov: [0-9]+" "$log" | tail -1 | cut -d' ' -f2)
    line=$(printf '%-28s %12s executions  %6s edges  %s' "$target" "${runs:-?}" "${coverage:-?}" "$verdict")
    echo "$line"
    summary="$summary$line
"
done
printf '\n%s seconds per target:\n%s' "$seconds" "$summary"
if [ -n "$failed" ]; then
    echo "fuzzing found failures in:$failed (inputs in .build/fuzz-artifacts/)" >&2
    exit 1
fi
