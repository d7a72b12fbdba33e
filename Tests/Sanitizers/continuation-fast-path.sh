#!/bin/sh
# Shows why the driver hands values to tasks through Handoff (Sources/Drivers/TetherDispatch/Handoff.swift)
# rather than a bare continuation: builds the reduced program in ContinuationFastPath/ under
# ThreadSanitizer and runs it both ways. With this toolchain's
# runtime, a continuation resumed before its task awaits gives a ThreadSanitizer report (the
# runtime's fast path makes no TSan acquire), and one resumed after gives none. Prints which holds;
# exits 0 either way (informational), 1 only if the program fails to build or run.
set -eu
cd "$(dirname "$0")/ContinuationFastPath"
swift build --sanitize=thread --scratch-path ../../../.build/continuation-fast-path 2>&1 | grep -E "error:" && exit 1
program=../../../.build/continuation-fast-path/debug/ContinuationFastPath
count() { TSAN_OPTIONS=halt_on_error=0 "$program" "$@" 2>&1 | grep -c "WARNING: ThreadSanitizer" || true; }
suspended=$(count)
resumed_first=$(count --resume-first)
echo "continuation fast path: $suspended report(s) when the task suspends first, $resumed_first when the resume comes first"
if [ "$suspended" -eq 0 ] && [ "$resumed_first" -gt 0 ]; then
    echo "the runtime still misses the TSan edge on the fast path: the driver needs Handoff"
elif [ "$resumed_first" -eq 0 ]; then
    echo "the fast path no longer yields a report: Handoff could go back to a bare continuation"
fi
