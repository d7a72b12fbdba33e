#!/usr/bin/env bash
# Porting checks: each file here is code written against an earlier round's API, annotated with
# the compiler messages a user porting it must get (`// expected-error {{…}}`, Swift's diagnostic
# verifier): a removed name fails with a message that names its replacement, never with a bare
# "cannot find". Type-checked against the debug build's modules (run after `swift build` or
# `swift test`; Tests/run.sh does).
#
#   Tests/Porting/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(swift build --show-bin-path)
[ -d "$build/Modules" ] || { echo "Tests/Porting: no debug build at $build (swift build first)" >&2; exit 1; }
flags=(-I "$build/Modules")
for module in CTetherText CEventPoll CSystemResolver; do
    flags+=(-Xcc "-fmodule-map-file=$build/$module.build/module.modulemap")
done
for include in Sources/Codecs/CTetherText/include Sources/Drivers/CEventPoll/include \
    Sources/Drivers/CSystemResolver/include Sources/Codecs/CExpat Sources/Protocols/COpenSSL; do
    flags+=(-Xcc "-I$include" -I "$include")
done
failed=0
checked=0
for file in Tests/Porting/*.swift; do
    checked=$((checked + 1))
    if ! swiftc -typecheck -Xfrontend -verify -Xfrontend -verify-ignore-unrelated "${flags[@]}" "$file"; then
        echo "Tests/Porting: $file does not get the compiler messages it expects (above)" >&2
        failed=$((failed + 1))
    fi
done
echo "porting checks: $checked files, $((checked - failed)) with every expected compiler message"
[ "$failed" -eq 0 ]
