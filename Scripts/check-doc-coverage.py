#!/usr/bin/env python3
"""Fails unless every public symbol of the given modules has a documentation comment.

    Scripts/check-doc-coverage.py SYMBOL_GRAPH_DIR MODULE...

Reads the symbol graphs `swift package dump-symbol-graph --minimum-access-level public` writes (a
module's own and its extensions of other modules'). Not counted: what the compiler synthesizes
(`hashValue`, `==` and the like) and implementations of a protocol's requirements or overrides,
which show the requirement's documentation.
"""
import glob
import json
import os
import sys


def missing(directory, module):
    found = []
    paths = [os.path.join(directory, module + ".symbols.json")] + glob.glob(
        os.path.join(directory, module + "@*.symbols.json"))
    for path in paths:
        if not os.path.exists(path):
            sys.exit(f"check-doc-coverage: no symbol graph {path}")
        with open(path, encoding="utf-8") as file:
            graph = json.load(file)
        inherited = {relation["source"] for relation in graph["relationships"]
                     if relation["kind"] in ("defaultImplementationOf", "overrides")}
        for symbol in graph["symbols"]:
            identifier = symbol["identifier"]["precise"]
            if symbol["accessLevel"] not in ("public", "open") or "::SYNTHESIZED::" in identifier:
                continue
            if "docComment" not in symbol and identifier not in inherited:
                kind = symbol["kind"]["identifier"].removeprefix("swift.")
                found.append(f"{module}: {kind} {'.'.join(symbol['pathComponents'])}")
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    undocumented = [line for module in sys.argv[2:] for line in missing(sys.argv[1], module)]
    if undocumented:
        print("\n".join(undocumented), file=sys.stderr)
        sys.exit(f"check-doc-coverage: {len(undocumented)} public symbols without documentation")
    print(f"check-doc-coverage: every public symbol of {len(sys.argv) - 2} modules is documented", file=sys.stderr)


if __name__ == "__main__":
    main()
