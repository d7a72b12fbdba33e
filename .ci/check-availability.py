#!/usr/bin/env python3
"""Checks the package against its platform floor with the toolchain's own availability data.

Linux has no availability, so `swift build` here accepts a standard-library API that a Mac or an
iPhone at the floor in Package.swift does not have. This script compiles the toolchain's
standard-library interfaces (`Swift`, `_Concurrency`, `_StringProcessing`: the `.swiftinterface`
files it ships, whose `@available` attributes are Apple's) for each Apple platform at the floor,
then type-checks every target of the package against them, in dependency order. The compiler's
own availability diagnostics are the result: every standard-library declaration used above the
floor outside `if #available` / `@available`-guarded code is listed, and the script fails if
there is any.

Modules this toolchain has no usable interface for (Foundation, Dispatch, Darwin, CryptoKit,
Synchronization, Testing, XCTest, OpenSSL's) are replaced by empty stand-ins: a target that imports one is checked
"partially" (expressions that name their declarations are not type-checked, so their other
errors are ignored); every other target is checked fully and any error fails the check.

Usage: python3 .ci/check-availability.py [--platforms macos,ios,...] [--cache DIR] [--verbose]
(Specs/platforms.md). The compiled interfaces are cached (default .build/availability), so later
runs take seconds.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# platformName in `swift package dump-package` → (triple, resource-dir folder). The interfaces are
# the host architecture's (x86-64 ones declare Float80, for one), so the other platforms are
# checked as their simulators on this architecture: the same availability as the devices.
PLATFORMS = {
    "macos": ("{arch}-apple-macosx{version}", "macosx"),
    "ios": ("{arch}-apple-ios{version}-simulator", "iphonesimulator"),
    "tvos": ("{arch}-apple-tvos{version}-simulator", "appletvsimulator"),
    "watchos": ("{arch}-apple-watchos{version}-simulator", "watchsimulator"),
}
# visionOS has no simulator on x86-64 and infers most availability from iOS, which this check
# cannot model for a visionOS target; instead every interface declaration above the visionOS
# floor must be above the iOS floor as well, so that the iOS check covers it.
COVERED_BY = {"visionos": ("ios", "visionOS", "iOS")}
AVAILABLE = re.compile(r"@available\(([^)]*)\)")
# Standard-library modules compiled from the toolchain's interfaces, in dependency order.
STDLIB = ["Swift", "_Concurrency", "_RegexParser", "_StringProcessing"]
# Modules with no interface here: empty stand-ins (Glibc and Musl are left missing on purpose, so
# that `#if canImport(Glibc)` code is skipped as on Apple platforms).
STAND_INS = ["Foundation", "FoundationEssentials", "Dispatch", "Darwin", "CryptoKit", "Security",
             "Network", "Synchronization", "Testing", "XCTest", "COpenSSL"]
SWIFT_FLAGS = ["-swift-version", "6", "-package-name", "tether"]
AVAILABILITY = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error: (?P<what>.+?) (?:is|are) only available in "
    r"(?P<platform>\S+) (?P<version>[\d.]+) or newer$", re.M)
ERROR = re.compile(r"^([^:\n]+):(\d+):(\d+): error: (.*)$", re.M)
IMPORT = re.compile(r"^\s*(?:@testable\s+|@preconcurrency\s+)?(?:public\s+|package\s+|internal\s+)?"
                    r"import\s+(?:struct\s+|enum\s+|class\s+|func\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)

# Minimal C headers for the type-check only (no C code is compiled): the C targets' headers need
# these, and there is no Apple SDK here. Clang's own headers supply stddef.h and stdint.h.
C_HEADERS = {
    "string.h": "#include <stddef.h>\nvoid *memchr(const void *, int, size_t);\n"
                "int memcmp(const void *, const void *, size_t);\nvoid *memcpy(void *, const void *, size_t);\n"
                "void *memmove(void *, const void *, size_t);\nvoid *memset(void *, int, size_t);\n"
                "size_t strlen(const char *);\n",
    "stdlib.h": "#include <stddef.h>\nvoid *malloc(size_t);\nvoid *calloc(size_t, size_t);\n"
                "void *realloc(void *, size_t);\nvoid free(void *);\n",
    "dlfcn.h": "#define RTLD_DEFAULT ((void *)-2)\nvoid *dlsym(void *, const char *);\n",
    "stdbool.h": "#define bool _Bool\n#define true 1\n#define false 0\n",
}


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def toolchain():
    swiftc = shutil.which("swiftc") or sys.exit("swiftc not found")
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(swiftc))), "lib", "swift")
    result = run([swiftc, "--version"])
    version = (result.stdout + result.stderr).strip().splitlines()[0]
    return swiftc, lib, version


def build_stdlib(swiftc, lib, version, triple, folder, cache, verbose):
    """The toolchain's stdlib interfaces compiled for `triple`, in a resource directory of their own."""
    arch = platform.machine()
    host = f"{arch}-unknown-linux-gnu"
    resources = os.path.join(cache, triple)
    stamp = os.path.join(resources, "toolchain.txt")
    identity = f"{version}\n{' '.join(STDLIB)}\n"
    if os.path.exists(stamp) and open(stamp).read() == identity:
        return resources
    shutil.rmtree(resources, ignore_errors=True)
    os.makedirs(os.path.join(resources, folder))
    os.symlink(os.path.join(lib, "shims"), os.path.join(resources, "shims"))
    os.symlink(os.path.join(lib, "clang"), os.path.join(resources, "clang"))
    module_file = re.sub(r"[\d.]+(?=-simulator$|$)", "", triple).replace("macosx", "macos")
    for module in STDLIB:
        source = os.path.join(lib, "linux", f"{module}.swiftmodule", f"{host}.swiftinterface")
        with open(source, encoding="utf-8") as f:
            text = f.read()
        text = text.replace(f"-target {host}", f"-target {triple}", 1)
        # Linux interfaces omit the bodies of @backDeployed functions; drop the attribute.
        text = drop_bodiless_back_deployment(text)
        interface = os.path.join(resources, f"{module}.swiftinterface")
        with open(interface, "w", encoding="utf-8") as f:
            f.write(text)
        directory = os.path.join(resources, folder, f"{module}.swiftmodule")
        os.makedirs(directory)
        flags = (["-parse-stdlib"] if module == "Swift" else []) + ["-disable-availability-checking"]
        result = run([swiftc, "-frontend", "-compile-module-from-interface", interface, "-module-name", module,
                      "-target", triple, "-resource-dir", resources, "-sdk", os.path.join(cache, "sdk"), *flags,
                      "-o", os.path.join(directory, f"{module_file}.swiftmodule")])
        if result.returncode != 0:
            sys.exit(f"could not compile the {module} interface for {triple}:\n{result.stderr[-4000:]}")
        if verbose:
            print(f"  compiled {module} for {triple}", file=sys.stderr)
    with open(stamp, "w") as f:
        f.write(identity)
    return resources


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def uncovered_declarations(lib, label, floor, cover_label, cover_floor):
    """Declarations of the stdlib interfaces available on `label` only above `floor` whose
    `cover_label` availability is not above `cover_floor`."""
    host = f"{platform.machine()}-unknown-linux-gnu"
    found = []
    for module in STDLIB:
        with open(os.path.join(lib, "linux", f"{module}.swiftmodule", f"{host}.swiftinterface"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines):
            for match in AVAILABLE.finditer(line):
                versions = dict(re.findall(r"(\w+) ([\d.]+)", match.group(1)))
                if label in versions and version_tuple(versions[label]) > version_tuple(floor):
                    if cover_label not in versions or version_tuple(versions[cover_label]) <= version_tuple(cover_floor):
                        found.append(f"{module}.swiftinterface:{number + 1}: {line.strip()[:120]}")
    return found


def make_sdk(cache):
    include = os.path.join(cache, "sdk", "usr", "include")
    os.makedirs(include, exist_ok=True)
    for name, text in C_HEADERS.items():
        with open(os.path.join(include, name), "w") as f:
            f.write("/* Declarations for the availability check only. */\n" + text)
    # The system libraries' own headers (Expat's), without the rest of /usr/include.
    for name in ("expat.h", "expat_external.h"):
        if os.path.exists(f"/usr/include/{name}") and not os.path.exists(os.path.join(include, name)):
            os.symlink(f"/usr/include/{name}", os.path.join(include, name))


def drop_bodiless_back_deployment(text):
    """Linux interfaces omit the bodies of some `@backDeployed` functions, which the attribute
    requires: drops the attribute where the declaration after it has no body."""
    lines = text.split("\n")
    kept = []
    for index, line in enumerate(lines):
        if line.lstrip().startswith("@backDeployed("):
            following = index + 1
            while following < len(lines) and re.fullmatch(r"\s*(@\w+(\([^)]*\))?\s*)+", lines[following]):
                following += 1
            if following < len(lines) and not lines[following].rstrip().endswith("{"):
                continue
        kept.append(line)
    return "\n".join(kept)


def package_targets():
    description = json.loads(run(["swift", "package", "dump-package"], cwd=ROOT, check=True).stdout)
    defaults = {"regular": "Sources", "executable": "Sources", "test": "Tests", "system": "Sources"}
    targets = {}
    for target in description["targets"]:
        path = os.path.join(ROOT, target.get("path") or os.path.join(defaults[target["type"]], target["name"]))
        dependencies = [next(iter(d.values()))[0] for d in target["dependencies"]]
        flags = []
        for setting in target.get("settings") or []:
            kind, value = next(iter(setting["kind"].items()))
            if setting["tool"] != "swift":
                continue
            if kind == "enableUpcomingFeature":
                flags += ["-enable-upcoming-feature", value["_0"]]
            elif kind == "enableExperimentalFeature":
                flags += ["-enable-experimental-feature", value["_0"]]
            elif kind == "strictMemorySafety":
                flags.append("-strict-memory-safety")
        targets[target["name"]] = {"type": target["type"], "path": path, "dependencies": dependencies,
                                   "flags": flags}
    return description["platforms"], targets


def order(targets):
    done, result = set(), []

    def visit(name):
        if name in done:
            return
        done.add(name)
        for dependency in targets[name]["dependencies"]:
            if dependency in targets:
                visit(dependency)
        result.append(name)

    for name in targets:
        visit(name)
    return result


def swift_sources(path):
    return sorted(os.path.join(root, name) for root, _, files in os.walk(path) for name in files
                  if name.endswith(".swift"))


def check(swiftc, resources, triple, targets, cache, stand_ins):
    modules = os.path.join(cache, "modules", triple)
    shutil.rmtree(modules, ignore_errors=True)
    os.makedirs(modules)
    maps = []
    for name, target in targets.items():
        if target["type"] == "system":
            if name in STAND_INS:
                continue
            maps.append(os.path.join(target["path"], "module.modulemap"))
        elif target["type"] == "regular" and not swift_sources(target["path"]):
            modulemap = os.path.join(modules, f"{name}.modulemap")
            include = os.path.join(target["path"], "include")
            with open(modulemap, "w") as f:
                f.write(f'module {name} {{\n    umbrella "{include}"\n    export *\n}}\n')
            maps.append(modulemap)
    common = ["-target", triple, "-resource-dir", resources, "-sdk", os.path.join(cache, "sdk"),
              "-I", modules, "-I", stand_ins, "-O", "-disable-objc-interop", *SWIFT_FLAGS]
    for modulemap in maps:
        common += ["-Xcc", f"-fmodule-map-file={modulemap}"]
    findings, partial, failures = [], [], []
    partial_modules = set()
    for name in order(targets):
        target = targets[name]
        sources = swift_sources(target["path"])
        if target["type"] == "system" or not sources:
            continue
        imported = set()
        for source in sources:
            with open(source, encoding="utf-8") as f:
                imported |= set(IMPORT.findall(f.read()))
        uses_stand_in = sorted((imported & set(STAND_INS)) | (imported & partial_modules))
        command = [swiftc, "-frontend", "-emit-module", "-module-name", name, *common, *target["flags"], *sources,
                   "-experimental-allow-module-with-compiler-errors",
                   "-o", os.path.join(modules, f"{name}.swiftmodule")]
        if target["type"] != "executable" or len(sources) > 1 or not sources[0].endswith("main.swift"):
            command.append("-parse-as-library")
        command.append("-enable-testing")  # for the tests' @testable imports
        output = run(command).stderr
        for match in AVAILABILITY.finditer(output):
            findings.append((name, os.path.relpath(match["file"], ROOT), int(match["line"]), int(match["col"]),
                             match["what"], f"{match['platform']} {match['version']}"))
        others = [m for m in ERROR.finditer(output) if not AVAILABILITY.match(m.group(0))]
        if uses_stand_in:
            partial.append((name, uses_stand_in))
            partial_modules.add(name)
        elif others:
            failures.append((name, [m.group(0) for m in others[:10]]))
    return findings, partial, failures


def main():
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("--platforms", help="comma-separated platformNames (default: all in Package.swift)")
    arguments.add_argument("--cache", default=os.path.join(ROOT, ".build", "availability"))
    arguments.add_argument("--verbose", action="store_true")
    options = arguments.parse_args()
    swiftc, lib, version = toolchain()
    floors, targets = package_targets()
    wanted = options.platforms.split(",") if options.platforms else [p["platformName"] for p in floors]
    cache = os.path.abspath(options.cache)
    make_sdk(cache)
    jobs = []
    for floor in floors:
        if floor["platformName"] not in wanted or floor["platformName"] in COVERED_BY:
            continue
        pattern, folder = PLATFORMS[floor["platformName"]]
        triple = pattern.format(arch=platform.machine().replace("aarch64", "arm64"), version=floor["version"])
        jobs.append((floor["platformName"], triple, folder))
    status = 0
    for floor in floors:
        name = floor["platformName"]
        if name not in COVERED_BY or name not in wanted:
            continue
        cover, label, cover_label = COVERED_BY[name]
        cover_floor = next(f["version"] for f in floors if f["platformName"] == cover)
        uncovered = uncovered_declarations(lib, label, floor["version"], cover_label, cover_floor)
        print(f"{name}: covered by the {cover} check ({len(uncovered)} declaration(s) not covered)")
        for declaration in uncovered:
            print(f"  {declaration}")
        if uncovered:
            status = 1
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        resources = list(pool.map(lambda job: build_stdlib(swiftc, lib, version, job[1], job[2], cache,
                                                            options.verbose), jobs))

    def check_platform(job, resource_dir):
        _, triple, _ = job
        stand_ins = os.path.join(cache, "stand-ins", triple)
        os.makedirs(stand_ins, exist_ok=True)
        for module in STAND_INS:
            empty = os.path.join(stand_ins, f"{module}.swift")
            open(empty, "w").close()
            run([swiftc, "-frontend", "-emit-module", "-module-name", module, "-parse-as-library", empty,
                 "-target", triple, "-resource-dir", resource_dir, "-sdk", os.path.join(cache, "sdk"),
                 "-O", "-disable-objc-interop", "-o", os.path.join(stand_ins, f"{module}.swiftmodule")], check=True)
        return check(swiftc, resource_dir, triple, targets, cache, stand_ins)

    # One platform per core: each type-checks the targets in dependency order.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(check_platform, jobs, resources))
    for (name, triple, _), (findings, partial, failures) in zip(jobs, results):
        print(f"{name} ({triple}): {len(findings)} use(s) above the floor")
        for target, path, line, column, what, needs in sorted(set(findings)):
            print(f"  {path}:{line}:{column}: {what} needs {needs}")
        for target, errors in failures:
            print(f"  {target}: could not be type-checked:")
            for error in errors:
                print(f"    {error}")
        if options.verbose:
            for target, modules in partial:
                print(f"  {target}: checked partially (stand-ins for {', '.join(modules)})")
        if findings or failures:
            status = 1
    if status == 0:
        print("No standard-library declaration is used above the floor outside availability-guarded code.")
    return status


if __name__ == "__main__":
    sys.exit(main())
