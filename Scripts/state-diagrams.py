#!/usr/bin/env python3
"""Draws each connection machine's state diagram from its transition table, the same table the
table tests run row by row against the code (ClientTransitionTableTests,
HubConnectionTransitionTableTests, HTTPTransportTransitionTableTests), so a diagram cannot show a transition the code does not make.

    Scripts/state-diagrams.py OUTPUT_DIR     writes xmpp-client-states.{dot,svg},
                                             signalr-hub-connection-states.{dot,svg} and
                                             http-transport-states.{dot,svg} (needs Graphviz's
                                             `dot`, Debian's graphviz)

Each row's state is the state the row starts in (a row describing a situation in that state, such
as "connected catching up", counts as its state: the first word that names one); each arrow joins
two states and is labeled with the inputs that take the machine along it.
"""
import collections
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TABLES = [
    # (spec, columns, output name, title, where a row's situation names no state outright)
    ("Specs/xmpp/client-machine.md", 4, "xmpp-client-states", "XMPPClientMachine",
     {"looking up the service": "connectingTransport", "waiting for the network": "reconnectWaiting",
      "connecting to": "connectingTransport", "opening a stream": "openingStream"}),
    ("Specs/signalr/hub-connection.md", 5, "signalr-hub-connection-states", "HubConnectionMachine",
     {"waiting for the network": "reconnectWaiting"}),
    ("Specs/http-transports.md", 4, "http-transport-states", "HTTPTransportMachine", {}),
]


def rows(spec, columns):
    """The table's rows (cells without the empty outer ones), as TransitionTable.read reads them."""
    with open(os.path.join(ROOT, spec), encoding="utf-8") as file:
        text = file.read()
    parts = text.split("## Transition table")
    if len(parts) < 2:
        sys.exit(f"state-diagrams: no transition table in {spec}")
    section = parts[1].split("\n## ")[0]
    found = []
    for line in section.split("\n"):
        if not line.startswith("|") or line.startswith("| state |") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) != columns + 2:
            sys.exit(f"state-diagrams: malformed row in {spec}: {line}")
        found.append(cells[1:columns + 1])
    if not found:
        sys.exit(f"state-diagrams: the transition table of {spec} has no rows")
    return found


def state_of(situation, names, aliases):
    first = situation.split(" ")[0].rstrip(",")
    if first in names:
        return first
    for phrase, name in aliases.items():
        if situation.startswith(phrase):
            return name
    sys.exit(f"state-diagrams: the row state '{situation}' names no state ({sorted(names)})")


def dot_text(table, title, aliases):
    names = {row[3] for row in table} | set(aliases.values())
    edges = collections.OrderedDict()
    for row in table:
        source = state_of(row[0], names, aliases)
        edges.setdefault((source, row[3]), [])
        if row[1] not in edges[(source, row[3])]:
            edges[(source, row[3])].append(row[1])
    lines = [
        f'digraph "{title}" {{',
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.35, ranksep=0.7, '
        f'label="{title}: {len(table)} transitions of the table, drawn from it", labelloc=t];',
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", color="#4a6fa5", fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=8, color="#555555"];',
    ]
    for name in sorted({state for edge in edges for state in edge}):
        lines.append(f'  "{name}";')
    for (source, target), inputs in edges.items():
        shown = inputs[:2]
        label = "\\n".join(item.replace('"', "'") for item in shown)
        if len(inputs) > 2:
            label += f"\\n(+{len(inputs) - 2} more)"
        lines.append(f'  "{source}" -> "{target}" [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    output = sys.argv[1]
    os.makedirs(output, exist_ok=True)
    for spec, columns, name, title, aliases in TABLES:
        text = dot_text(rows(spec, columns), title, aliases)
        dot_path = os.path.join(output, name + ".dot")
        with open(dot_path, "w", encoding="utf-8") as file:
            file.write(text)
        try:
            subprocess.run(["dot", "-Tsvg", dot_path, "-o", os.path.join(output, name + ".svg")], check=True)
        except FileNotFoundError:
            sys.exit("state-diagrams: Graphviz's dot is missing (apt-get install graphviz)")


if __name__ == "__main__":
    main()
