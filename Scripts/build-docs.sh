#!/usr/bin/env bash
# Builds the API reference: one DocC archive per public module (its symbols and its catalog,
# Sources/…/MODULE.docc, with the state diagrams drawn from the transition tables), merged into one
# static site at .build/docs/site (open .build/docs/site/documentation/ through any web server;
# `python3 -m http.server -d .build/docs/site` will do). Any DocC warning fails the build (an
# unresolved symbol link, a missing resource), and so does a public symbol without documentation.
#
#   Scripts/build-docs.sh
#
# Needs the toolchain's `docc` and Graphviz's `dot` (Debian's graphviz; Tests/run.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(TetherXMPPClient TetherSignalRClient TetherXMPP TetherSignalR TetherDispatch TetherCore
    TetherXML TetherJSON TetherMessagePack TetherText TetherDNS TetherHTTP TetherTLS)
out=.build/docs
rm -rf "$out"
mkdir -p "$out/symbols" "$out/archives" "$out/diagrams"

command -v docc >/dev/null || { echo "build-docs: the toolchain's docc is missing" >&2; exit 1; }
python3 Scripts/state-diagrams.py "$out/diagrams"

echo "build-docs: symbol graphs…" >&2
swift package dump-symbol-graph --minimum-access-level public >"$out/symbol-graphs.log" 2>&1 || {
    cat "$out/symbol-graphs.log" >&2
    exit 1
}
graphs=$(sed -n 's/^Files written to //p' "$out/symbol-graphs.log" | tail -n 1)
[ -d "$graphs" ] || { echo "build-docs: no symbol graphs (see $out/symbol-graphs.log)" >&2; exit 1; }

python3 Scripts/check-doc-coverage.py "$graphs" "${modules[@]}"

for module in "${modules[@]}"; do
    mkdir -p "$out/symbols/$module"
    cp "$graphs/$module.symbols.json" "$out/symbols/$module/"
    for extension in "$graphs/$module"@*.symbols.json; do
        [ -e "$extension" ] && cp "$extension" "$out/symbols/$module/"
    done
    catalog=$(find Sources -type d -name "$module.docc" | head -n 1)
    arguments=()
    if [ -n "$catalog" ]; then
        # The catalog with the diagrams it shows (generated, never checked in).
        mkdir -p "$out/catalogs"
        cp -R "$catalog" "$out/catalogs/"
        for diagram in $(grep -rhoE '[a-z-]+-states\.svg' "$catalog" | sort -u); do
            mkdir -p "$out/catalogs/$module.docc/Resources"
            cp "$out/diagrams/$diagram" "$out/catalogs/$module.docc/Resources/"
        done
        arguments+=("$out/catalogs/$module.docc")
    fi
    echo "build-docs: $module…" >&2
    docc convert "${arguments[@]}" \
        --additional-symbol-graph-dir "$out/symbols/$module" \
        --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.tether.$module" \
        --output-path "$out/archives/$module.doccarchive" \
        --warnings-as-errors >"$out/archives/$module.log" 2>&1 || {
        cat "$out/archives/$module.log" >&2
        echo "build-docs: DocC reported the problems above for $module" >&2
        exit 1
    }
done

docc merge "$out"/archives/*.doccarchive \
    --synthesized-landing-page-name Tether \
    --synthesized-landing-page-kind Package \
    --synthesized-landing-page-topics-style list \
    --output-path "$out/Tether.doccarchive" >"$out/merge.log" 2>&1 || {
    cat "$out/merge.log" >&2
    exit 1
}
cp -R "$out/Tether.doccarchive" "$out/site"
echo "build-docs: .build/docs/site (${#modules[@]} modules, no warnings)" >&2
