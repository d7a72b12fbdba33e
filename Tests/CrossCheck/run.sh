#!/bin/sh
# The text kernels on every form they ship in (part of the test command, Tests/run.sh): the UTF-8
# validator against a scalar reference and the JSON kernels' digest, built with the host's gcc and
# clang (on x86-64 every form this processor runs: portable, AVX2, AVX-512BW) and for ARM64 (NEON,
# the iPhone's instruction set) with aarch64 gcc and clang, run under qemu. clang is the Swift
# toolchain's (the compiler that builds CTetherText in the package; Debian 12's clang 14 lacks the
# boolean vectors the JSON kernels use). Every compiler is required: a missing one is a failure
# naming the package (Tests/run.sh installs them: gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross
# qemu-user). Exits non-zero on the first mismatch; the last line gives the counts.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
kernels="$here/../../Sources/Codecs/CTetherText"
include="-I $kernels/include"
utf8_sources="$here/utf8_check_harness.c $kernels/utf8.c $kernels/cpu.c"
json_sources="$here/json_kernels_harness.c $kernels/json.c $kernels/utf8.c $kernels/cpu.c"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

swift_bin=$(dirname "$(command -v swift || echo /nonexistent/swift)")
clang="$swift_bin/clang"
if [ ! -x "$clang" ]; then
    echo "cross-check: the Swift toolchain's clang is missing (looked for $clang)" >&2
    exit 1
fi
for tool in gcc:gcc aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64:qemu-user; do
    if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
        echo "cross-check: ${tool%%:*} is missing (apt-get install ${tool#*:})" >&2
        exit 1
    fi
done
if [ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]; then
    echo "cross-check: the ARM64 C library is missing (apt-get install libc6-dev-arm64-cross)" >&2
    exit 1
fi

# Builds SOURCES for ARM64 with clang (the compiler family of Xcode), linked statically by gcc.
arm_clang() { # OUTPUT SOURCES...
    output=$1
    shift
    mkdir -p "$output.o"
    for source in "$@"; do
        "$clang" --target=aarch64-linux-gnu -O2 -Wall -Wextra -Werror $include -c "$source" \
            -o "$output.o/$(basename "$source").o"
    done
    aarch64-linux-gnu-gcc -static -o "$output" "$output.o"/*.o
}

# UTF-8: "N checks (forms: …), M mismatches", failing on any mismatch.
utf8_runs=""
utf8_checks=0
utf8() { # NAME COMMAND...
    name=$1
    shift
    line=$("$@") || { echo "cross-check: UTF-8, $name: $line" >&2; exit 1; }
    echo "UTF-8, $name: $line"
    utf8_checks=$((utf8_checks + ${line%% *}))
    utf8_runs="$utf8_runs${utf8_runs:+, }$name"
}
gcc -O2 -Wall -Wextra -Werror $include -o "$out/utf8-gcc" $utf8_sources
utf8 "x86-64 gcc" "$out/utf8-gcc"
"$clang" -O2 -Wall -Wextra -Werror $include -o "$out/utf8-clang" $utf8_sources
utf8 "x86-64 clang" "$out/utf8-clang"
# Every form under AddressSanitizer: each input sits in an allocation of exactly its size, so a
# read past its end (or before its start) stops the run.
"$clang" -O1 -g -fsanitize=address -fno-omit-frame-pointer $include -o "$out/utf8-asan" $utf8_sources
utf8 "x86-64 clang with AddressSanitizer" "$out/utf8-asan"
aarch64-linux-gnu-gcc -O2 -static -Wall -Wextra -Werror $include -o "$out/utf8-arm-gcc" $utf8_sources
utf8 "ARM64 gcc" qemu-aarch64 "$out/utf8-arm-gcc"
arm_clang "$out/utf8-arm-clang" $utf8_sources
utf8 "ARM64 clang" qemu-aarch64 "$out/utf8-arm-clang"

# JSON kernels (Clang's boolean vectors: clang only): the first line (accepted count and digest)
# must be the same on x86-64 (every form agreeing) and on ARM64.
"$clang" -O2 -Wall -Wextra -Werror $include -o "$out/json-host" $json_sources
host=$("$out/json-host") || { echo "cross-check: JSON kernels, x86-64: $host" >&2; exit 1; }
echo "JSON kernels, x86-64 clang: $(echo "$host" | paste -sd';' -)"
"$clang" -O1 -g -fsanitize=address -fno-omit-frame-pointer $include -o "$out/json-asan" $json_sources
asan=$("$out/json-asan") || { echo "cross-check: JSON kernels under AddressSanitizer: $asan" >&2; exit 1; }
echo "JSON kernels, x86-64 clang with AddressSanitizer: $(echo "$asan" | paste -sd';' -)"
if [ "$(echo "$asan" | head -n 1)" != "$(echo "$host" | head -n 1)" ]; then
    echo "cross-check: the JSON kernels differ under AddressSanitizer" >&2
    exit 1
fi
arm_clang "$out/json-arm" $json_sources
arm=$(qemu-aarch64 "$out/json-arm") || { echo "cross-check: JSON kernels, ARM64: $arm" >&2; exit 1; }
echo "JSON kernels, ARM64 clang: $(echo "$arm" | paste -sd';' -)"
host_digest=$(echo "$host" | head -n 1)
if [ "$host_digest" != "$(echo "$arm" | head -n 1)" ]; then
    echo "cross-check: the JSON kernels differ between x86-64 and ARM64" >&2
    exit 1
fi

host_forms=$(echo "$host" | sed -n 's/^forms: //p')
echo "cross-check: $utf8_checks UTF-8 checks without a mismatch ($utf8_runs); JSON kernels' digest" \
    "${host_digest##* } the same on x86-64 (forms: $host_forms; also under AddressSanitizer) and ARM64"
