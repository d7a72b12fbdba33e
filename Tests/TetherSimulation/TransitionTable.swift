import Foundation
public import TetherCore

/// Reads the transition table of a machine's spec (`Specs/…`, a Markdown table after the heading
/// "## Transition table", up to the next "## " heading) for the table tests, which run every row
/// against the code.
public enum TransitionTable {
    /// The rows' cells (without the leading and trailing empty cells), and the lines that are not
    /// a row of `columns` cells with the state, input and next state (the first, second and
    /// fourth) filled in.
    public static func read(_ specPath: String, columns: Int) -> (rows: [[String]], malformed: [String]) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        guard let text = try? String(contentsOf: root.appendingPathComponent(specPath), encoding: .utf8) else {
            return ([], ["cannot read \(specPath)"])
        }
        let parts = text.components(separatedBy: "## Transition table")
        guard parts.count > 1 else { return ([], ["no transition table in \(specPath)"]) }
        let section = parts[1].components(separatedBy: "\n## ")[0]
        var rows: [[String]] = []
        var malformed: [String] = []
        for line in section.split(separator: "\n") where line.hasPrefix("|") {
            if line.hasPrefix("| state |") || line.hasPrefix("|---") { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count == columns + 2, cells[0].isEmpty, cells[columns + 1].isEmpty, !cells[1].isEmpty,
                !cells[2].isEmpty, !cells[4].isEmpty
            else {
                malformed.append(String(line))
                continue
            }
            rows.append(Array(cells[1...columns]))
        }
        return (rows, malformed)
    }

    /// A cell's comma-separated list (actions, timers); empty for an empty cell.
    public static func list(_ cell: String) -> [String] {
        cell.isEmpty ? [] : cell.components(separatedBy: ", ")
    }

    /// The table's rows as `TransitionRow`s (state, input, actions, next state, and the timers
    /// of a fifth column when there is one), and the malformed lines (`read`).
    public static func rows(_ specPath: String, columns: Int) -> (rows: [TransitionRow], malformed: [String]) {
        let (cells, malformed) = read(specPath, columns: columns)
        let rows = cells.map {
            TransitionRow(
                state: $0[0],
                input: $0[1],
                actions: list($0[2]),
                next: $0[3],
                timers: columns > 4 ? list($0[4]) : []
            )
        }
        return (rows, malformed)
    }
}

/// One row of a transition table: a table test's argument, shown as "state | input".
public struct TransitionRow: Sendable, CustomStringConvertible {
    /// The state the row starts in (or a situation in it, which the test's setup knows).
    public var state: String
    /// The input applied.
    public var input: String
    /// The actions expected, in order.
    public var actions: [String]
    /// The state expected after.
    public var next: String
    /// The timers armed after the row (sorted), where the table has that column.
    public var timers: [String]

    public var description: String { "\(state) | \(input)" }
}

/// A lifecycle change's name in the transition tables' transcripts (`event:NAME`), the same for
/// every machine: `connected`, `resumed`, `connectionlost`, `attemptfailed`, `reconnecting`,
/// `waitingfornetwork`, `suspended`, `closed`.
public func lifecycleName<Session, Failure>(_ change: ConnectionLifecycle<Session, Failure>) -> String {
    switch change {
    case .connected: "connected"
    case .resumed: "resumed"
    case .connectionLost: "connectionlost"
    case .attemptFailed: "attemptfailed"
    case .reconnecting: "reconnecting"
    case .waitingForNetwork: "waitingfornetwork"
    case .suspended: "suspended"
    case .closed: "closed"
    }
}
