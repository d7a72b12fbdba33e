#!/usr/bin/env bash
# The test command: sets up everything the tests need, then runs the whole suite.
#
#   Tests/run.sh [ARGUMENTS FOR swift test]...       (for example --filter XMPPClientTests)
#
# On a fresh Debian 12 machine with the Swift toolchain it installs, when run as root, the Debian
# packages the build and the real-server tests need (Expat and OpenSSL for the build; prosody,
# dnsmasq, the openssl command and python3-venv for the servers the tests start on 127.0.0.1); it makes the
# Python virtual environment .build/venv-aiosignalr with aiosignalr 0.1.1 (PyPI), the SignalR hub
# the tests start; then it runs `swift test`, the porting checks (Tests/Porting: old code gets
# compiler messages naming the replacements), builds the API reference (Scripts/build-docs.sh: no
# DocC warning, every public symbol documented) and opens it in headless Chromium
# (Scripts/check-docs-site.py), cross-checks the text kernels on every form they ship in
# (Tests/CrossCheck/run.sh: every x86-64 form this processor runs, ARM64 under qemu), and ends with a line saying how many real-server suites ran,
# failed for want of a program, and were skipped, and with the run's notes (which forms of the
# text kernels this processor ran). With arguments (a filter) only `swift test` runs.
#
# Not root: missing packages are named with the command that installs them, and the suites that
# need them fail saying the same. A machine without the servers (a laptop without prosody) can
# skip every real-server suite on purpose with TETHER_SKIP_REAL_SERVERS=1; a developer without
# root skips only the suites that need it (network namespaces) with TETHER_SKIP_ROOT_SUITES=1;
# nothing is skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

# pkg-config, libexpat1-dev, libssl-dev: the build (Expat for XML, OpenSSL 3 for SCRAM and TLS).
# prosody 13 and prosody-modules from bookworm-backports (below; + lua-unbound, which silences its
# DNS warning): the real XMPP server, with SASL2, Bind 2, FAST, channel binding. openssl: the
# throw-away CA and certificates of the TLS tests. dnsmasq-base: the DNS server of the DNS tests.
# iproute2: the network namespaces of the network-monitor tests (which also need root).
# python3, python3-venv: aiosignalr's environment. graphviz: the state diagrams of the API
# reference; chromium: the check that the reference renders in a browser. gcc,
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the text kernels' cross-check
# (Tests/CrossCheck: x86-64 and ARM64 builds, the ARM64 ones run under qemu).
packages=(pkg-config libexpat1-dev libssl-dev openssl lua-unbound dnsmasq-base iproute2 python3 python3-venv
    graphviz chromium gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)

if command -v dpkg-query >/dev/null 2>&1; then
    missing=()
    for package in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$package")
        fi
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        if [ "$(id -u)" -eq 0 ]; then
            echo "Tests/run.sh: installing ${missing[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -q
            apt-get install -y -q --no-install-recommends "${missing[@]}"
            # The Debian package starts a system-wide prosody; the tests start their own.
            if command -v systemctl >/dev/null 2>&1; then systemctl stop prosody >/dev/null 2>&1 || true; fi
        else
            echo "Tests/run.sh: missing Debian packages: ${missing[*]}" >&2
            echo "  install them with: sudo apt-get install ${missing[*]}" >&2
            echo "  (or run this script as root; TETHER_SKIP_REAL_SERVERS=1 skips the real-server suites)" >&2
        fi
    fi

    # prosody 13 with the community modules, from Debian's bookworm-backports (Debian 12 itself
    # ships 0.12, which has no SASL2, Bind 2 or FAST): the source is added next to the one the
    # machine uses (backports have priority 100, so nothing else comes from it without -t).
    prosody_version=$(dpkg-query -W -f='${Version}' prosody 2>/dev/null || true)
    modules_installed=$(dpkg-query -W -f='${Status}' prosody-modules 2>/dev/null || true)
    if [[ "$prosody_version" != 13.* ]] || [[ "$modules_installed" != *"install ok installed"* ]]; then
        if [ "$(id -u)" -eq 0 ]; then
            echo "Tests/run.sh: installing prosody 13 and prosody-modules from bookworm-backports"
            if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
                mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
                printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
                    "${mirror:-http://deb.debian.org/debian}" /usr/share/keyrings/debian-archive-keyring.gpg \
                    > /etc/apt/sources.list.d/tether-backports.sources
            fi
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -q
            apt-get install -y -q --no-install-recommends -t bookworm-backports prosody prosody-modules
            if command -v systemctl >/dev/null 2>&1; then systemctl stop prosody >/dev/null 2>&1 || true; fi
        else
            echo "Tests/run.sh: prosody 13 and prosody-modules from bookworm-backports are missing (found: ${prosody_version:-none})" >&2
            echo "  install them with: add bookworm-backports to the apt sources, then" >&2
            echo "  sudo apt-get install -t bookworm-backports prosody prosody-modules" >&2
        fi
    fi
else
    echo "Tests/run.sh: not a Debian system; install Expat, OpenSSL 3, prosody 13 (+ community modules) and python3 yourself" >&2
fi

# aiosignalr 0.1.1 in the virtual environment the SignalR tests look for.
venv=.build/venv-aiosignalr
if command -v python3 >/dev/null 2>&1; then
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p .build
        python3 -m venv "$venv" || echo "Tests/run.sh: cannot make $venv (python3-venv missing?)" >&2
    fi
    if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c \
        'import importlib.metadata as m, sys; sys.exit(m.version("aiosignalr") != "0.1.1")' 2>/dev/null; then
        "$venv/bin/pip" install --quiet --disable-pip-version-check aiosignalr==0.1.1
    fi
fi

if [ "$(id -u)" -ne 0 ] && [ -z "${TETHER_SKIP_ROOT_SUITES:-}" ] && [ -z "${TETHER_SKIP_REAL_SERVERS:-}" ]; then
    echo "Tests/run.sh: not root: the network-namespace suite will fail; TETHER_SKIP_ROOT_SUITES=1 skips it" >&2
fi

# The test report (Tests/TetherTestSupport/TestReport.swift): each real-server suite writes "ran
# NAME", "missing NAME" (a program it needs is not installed: the suite fails), "skipped NAME" or
# "skipped-root NAME"; tests write "note TEXT" for what the summary should say (which forms of the
# text kernels this processor ran).
report=$(mktemp "${TMPDIR:-/tmp}/tether-test-report.XXXXXX")
trap 'rm -f "$report"' EXIT
status=0
TETHER_TEST_REPORT="$report" swift test "$@" || status=$?

docs="not built (a filtered run)"
cross_check="not run (a filtered run)"
if [ "$#" -eq 0 ]; then
    # The text kernels on every form they ship in: every x86-64 form this processor runs, and
    # ARM64 under qemu (Tests/CrossCheck/README.md).
    cross_log=$(mktemp "${TMPDIR:-/tmp}/tether-cross-check.XXXXXX")
    if Tests/CrossCheck/run.sh 2>&1 | tee "$cross_log"; then
        cross_check=$(tail -n 1 "$cross_log" | sed 's/^cross-check: //')
    else
        cross_check="FAILED (above)"
        status=1
    fi
    rm -f "$cross_log"
    # Code written against earlier rounds' API gets compiler messages naming the replacements.
    Tests/Porting/check.sh || status=1
    if Scripts/build-docs.sh && Scripts/check-docs-site.py; then
        docs="built without warnings, every public symbol documented, rendered in Chromium"
    else
        docs="FAILED (above)"
        status=1
    fi
fi

count() { grep -c "^$1 " "$report" || true; }
names() { grep "^$1 " "$report" | cut -d' ' -f2- | sort -u | paste -sd, - || true; }
missing=$(names missing)
skipped=$(names skipped)
skipped_root=$(names skipped-root)
echo "real-server suites: $(count ran) ran, $(count missing) missing a program${missing:+ ($missing)}," \
    "$(count skipped) skipped${skipped:+ ($skipped)}, $(count skipped-root) skipped needing root${skipped_root:+ ($skipped_root)}"
echo "API reference: $docs"
echo "text kernels' cross-check: $cross_check"
grep '^note ' "$report" | cut -d' ' -f2- | sort -u || true
exit "$status"
