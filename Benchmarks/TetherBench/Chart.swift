import Foundation

/// `tether-bench --chart FILE.svg`: the run as a picture — one horizontal bar per throughput row
/// (MB/s), grouped by protocol, each baseline (grey) beside the rows compared with it, every bar
/// labelled with its speed and the row's note (the ratio). Each group has its own scale (the
/// comparisons are within a group). Rows without a throughput (memory per machine, timer sweeps)
/// are listed as text under their group. Plain SVG, no dependency.
enum Chart {
    /// The group a row belongs to, from its name.
    static func group(of name: String) -> String {
        if name.hasPrefix("signalr-json") || name.hasPrefix("foundation") { return "SignalR JSON" }
        if name.hasPrefix("codable-floor") { return "Codable (the floor of any Codable decoder)" }
        if name.hasPrefix("signalr-msgpack") || name.hasPrefix("msgpack") { return "SignalR MessagePack" }
        if name.hasPrefix("hub-") { return "Hub connection machine" }
        if name.hasPrefix("websocket-loopback") { return "WebSocket loopback echo" }
        if name.hasPrefix("websocket") { return "WebSocket decoding" }
        if name.hasPrefix("xmpp-machine") || name.hasPrefix("xmpp-decode (stanzas only)") {
            return "XMPP client machine"
        }
        if name.hasPrefix("xmpp") || name.hasPrefix("xml") || name.hasPrefix("expat") { return "XMPP / XML" }
        return "Other"
    }

    static func isBaseline(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return lowered.contains("baseline") || lowered.contains("foundation") || lowered.contains("jsondecoder")
            || lowered.contains("expat") || lowered.contains("floor") || lowered.contains("(same stream)")
            || lowered.contains("(stanzas only)")
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func svg(_ results: [BenchmarkResult], title: String) -> String {
        var groups: [(name: String, rows: [BenchmarkResult])] = []
        for result in results {
            let name = group(of: result.name)
            if let index = groups.firstIndex(where: { $0.name == name }) {
                groups[index].rows.append(result)
            } else {
                groups.append((name, [result]))
            }
        }
        func hasBar(_ row: BenchmarkResult) -> Bool {
            row.bytes > 0 && row.megabytesPerSecond.isFinite && !row.name.contains("idle")
        }
        let labelWidth = 430.0
        let barWidth = 520.0
        let width = labelWidth + barWidth + 420
        var y = 50.0
        var body: [String] = []
        for group in groups {
            body.append(#"<text x="10" y="\#(y + 14)" class="group">\#(escape(group.name))</text>"#)
            y += 24
            let maximum = max(1, group.rows.filter(hasBar).map(\.megabytesPerSecond).max() ?? 1)
            for row in group.rows {
                let hasBar = hasBar(row)
                body.append(
                    #"<text x="\#(labelWidth - 8)" y="\#(y + 13)" class="label" text-anchor="end">\#(escape(row.name))</text>"#
                )
                var noteX = labelWidth
                if hasBar {
                    let length = max(1, barWidth * row.megabytesPerSecond / maximum)
                    let fill = isBaseline(row.name) ? "#9e9e9e" : "#2f6fb3"
                    body.append(
                        #"<rect x="\#(labelWidth)" y="\#(y)" width="\#(String(format: "%.1f", length))" height="16" fill="\#(fill)"/>"#
                    )
                    body.append(
                        #"<text x="\#(labelWidth + length + 6)" y="\#(y + 13)" class="value">\#(String(format: "%.0f MB/s", row.megabytesPerSecond))</text>"#
                    )
                    noteX = labelWidth + length + 90
                }
                if !row.note.isEmpty {
                    body.append(#"<text x="\#(noteX)" y="\#(y + 13)" class="note">\#(escape(row.note))</text>"#)
                }
                y += 22
            }
            y += 12
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(y + 10))" viewBox="0 0 \(Int(width)) \(Int(y + 10))">
            <style>
            text { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 12px; fill: #222; }
            .title { font-size: 16px; font-weight: bold; }
            .group { font-size: 13px; font-weight: bold; }
            .value { fill: #111; }
            .note { fill: #555; font-size: 11px; }
            </style>
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="26" class="title">\(escape(title))</text>
            \(body.joined(separator: "\n"))
            </svg>

            """
    }
}
