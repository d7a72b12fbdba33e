#!/bin/sh
# Builds the UTF-8 validator cross-check with every compiler found here and runs it: the host's
# gcc and clang, and, when aarch64-linux-gnu-gcc and qemu-aarch64 are installed
# (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user), ARM64 (NEON) with
# gcc and with clang. Exits non-zero on the first mismatch.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sources="$here/utf8_check_harness.c $here/../../Sources/Codecs/CTetherText/utf8.c $here/../../Sources/Codecs/CTetherText/cpu.c"
include="-I $here/../../Sources/Codecs/CTetherText/include"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for cc in gcc clang; do
    if command -v "$cc" >/dev/null 2>&1; then
        echo "== host, $cc"
        $cc -O2 -Wall -Wextra $include -o "$out/host-$cc" $sources
        "$out/host-$cc"
    fi
done
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "== aarch64, gcc (under qemu)"
    aarch64-linux-gnu-gcc -O2 -static -Wall -Wextra $include -o "$out/arm-gcc" $sources
    qemu-aarch64 "$out/arm-gcc"
    if command -v clang >/dev/null 2>&1; then
        echo "== aarch64, clang (under qemu)"
        for source in $sources; do
            clang --target=aarch64-linux-gnu -O2 -Wall -Wextra $include -c "$source" -o "$out/$(basename "$source").o"
        done
        aarch64-linux-gnu-gcc -static -o "$out/arm-clang" "$out"/*.o
        qemu-aarch64 "$out/arm-clang"
    fi
fi

# The JSON kernels (json.c, Clang's boolean vectors: clang only): the host build and the ARM64
# build under qemu must print the same digest of a million results. (The tests hold the host
# build to the Swift reference.)
if command -v clang >/dev/null 2>&1; then
    json_sources="$here/json_kernels_harness.c $here/../../Sources/Codecs/CTetherText/json.c $here/../../Sources/Codecs/CTetherText/utf8.c $here/../../Sources/Codecs/CTetherText/cpu.c"
    echo "== JSON kernels, host clang"
    clang -O2 -Wall -Wextra $include -o "$out/json-host" $json_sources
    host_digest=$("$out/json-host")
    echo "$host_digest"
    if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1; then
        echo "== JSON kernels, aarch64 clang (under qemu)"
        mkdir -p "$out/json-arm"
        for source in $json_sources; do
            clang --target=aarch64-linux-gnu -O2 -Wall -Wextra $include -c "$source" -o "$out/json-arm/$(basename "$source").o"
        done
        aarch64-linux-gnu-gcc -static -o "$out/json-arm/harness" "$out/json-arm"/*.o
        arm_digest=$(qemu-aarch64 "$out/json-arm/harness")
        echo "$arm_digest"
        if [ "$host_digest" != "$arm_digest" ]; then
            echo "JSON kernels differ between x86-64 and ARM64" >&2
            exit 1
        fi
    fi
fi
