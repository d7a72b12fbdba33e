#!/usr/bin/env python3
"""Checks that every target's dependencies in Package.swift are exactly the modules its sources
import (system modules aside): no missing dependency that works only by accident of another
target's, and no dependency nobody imports. Then checks the module seams (Specs/modules.md):
what each library target may not pull in, directly or through others, so that an app links only
the protocol it uses.

Usage: swift package dump-package | python3 .ci/check-dependencies.py
"""
import json
import os
import re
import sys

SYSTEM = {"Foundation", "FoundationXML", "FoundationEssentials", "Dispatch", "CDispatch", "Glibc", "Musl", "Darwin",
          "Testing", "XCTest", "CryptoKit", "Synchronization"}
IMPORT = re.compile(r"^\s*(?:@testable\s+|@_implementationOnly\s+|@_spi\([A-Za-z_]+\)\s+)*(?:public\s+|package\s+|internal\s+|private\s+|fileprivate\s+)?import\s+(?:struct\s+|enum\s+|class\s+|func\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)

package = json.load(sys.stdin)
defaults = {"regular": "Sources", "executable": "Sources", "test": "Tests", "system": "Sources"}
failures = []
for target in package["targets"]:
    if target["type"] in ("system", "binary", "plugin"):
        continue
    path = target.get("path") or os.path.join(defaults.get(target["type"], "Sources"), target["name"])
    imported = set()
    for root, _, files in os.walk(path):
        for name in files:
            if name.endswith(".swift"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    imported |= set(IMPORT.findall(f.read()))
    swift_sources = any(name.endswith(".swift") for _, _, files in os.walk(path) for name in files)
    if not swift_sources:
        continue  # C targets
    declared = set()
    for dependency in target["dependencies"]:
        kind, value = next(iter(dependency.items()))
        declared.add(value[0])
    imported -= SYSTEM
    imported.discard(target["name"])
    missing = sorted(imported - declared)
    unused = sorted(declared - imported)
    if missing or unused:
        failures.append("%s: %s%s" % (
            target["name"],
            ("imports without depending on " + ", ".join(missing)) if missing else "",
            ("; " if missing and unused else "") + (("depends on but never imports " + ", ".join(unused)) if unused else ""),
        ))
if failures:
    print("Package.swift dependencies differ from the imports:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("Package.swift dependencies match the imports of all %d targets." % len(package["targets"]))

# The seams: a target, and the modules it must not reach through its dependencies.
XMPP_ONLY = {"TetherXMPP", "TetherXML", "CExpat", "TetherXMPPClient"}
SIGNALR_ONLY = {"TetherSignalR", "TetherJSON", "TetherMessagePack", "TetherSignalRClient"}
DRIVER = {"TetherDispatch", "TetherXMPPClient", "TetherSignalRClient"}
TEXT = {"TetherText", "CTetherText"}
SEAMS = {
    # An app that uses only SignalR links no XMPP code and no Expat, and the reverse.
    "TetherSignalRClient": XMPP_ONLY,
    "TetherSignalR": XMPP_ONLY | DRIVER | {"TetherDNS", "TetherTLS"},
    "TetherXMPPClient": SIGNALR_ONLY,
    # The sans-IO XMPP machine links no text kernels or codec plumbing (Expat validates its input).
    "TetherXMPP": SIGNALR_ONLY | DRIVER | TEXT | {"TetherHTTP", "TetherTLS"},
    # The shared driver knows neither protocol.
    "TetherDispatch": XMPP_ONLY | SIGNALR_ONLY,
    # TLS and SCRAM's OpenSSL hashes stand alone: a sans-IO user gets them without the driver.
    "TetherTLS": XMPP_ONLY | SIGNALR_ONLY | DRIVER | TEXT | {"TetherDNS", "TetherHTTP"},
    # The sans-IO transport protocols know no application protocol and no driver.
    "TetherHTTP": XMPP_ONLY | SIGNALR_ONLY | DRIVER | {"TetherDNS", "TetherTLS"},
    "TetherDNS": XMPP_ONLY | SIGNALR_ONLY | DRIVER | TEXT | {"TetherHTTP", "TetherTLS"},
    # The text layer knows no codec built on it.
    "TetherText": XMPP_ONLY | SIGNALR_ONLY | DRIVER | {"TetherDNS", "TetherHTTP", "TetherTLS"},
    # The machine kit stands alone: every other module builds on it.
    "TetherCore": XMPP_ONLY | SIGNALR_ONLY | DRIVER | TEXT | {"TetherDNS", "TetherHTTP", "TetherTLS"},
}
dependencies = {}
for target in package["targets"]:
    names = set()
    for dependency in target["dependencies"]:
        kind, value = next(iter(dependency.items()))
        names.add(value[0])
    dependencies[target["name"]] = names


def closure(name):
    seen, stack = set(), [name]
    while stack:
        for dependency in dependencies.get(stack.pop(), ()):
            if dependency not in seen:
                seen.add(dependency)
                stack.append(dependency)
    return seen


broken = []
for name, forbidden in SEAMS.items():
    if name not in dependencies:
        broken.append("%s: no such target" % name)
        continue
    reached = sorted(closure(name) & forbidden)
    if reached:
        broken.append("%s reaches %s" % (name, ", ".join(reached)))
if broken:
    print("Module seams broken (Specs/modules.md):\n  " + "\n  ".join(broken))
    sys.exit(1)
print("Module seams hold for %d targets." % len(SEAMS))
