import TetherCore
import TetherJSON

/// The lifecycle (`ConnectionLifecycle`) as JSON lines, the same for both commands: only the
/// session's fields differ (XMPP: the JID; SignalR: the transport and connection id).
enum LifecycleLine {
    static let help = """
        Lifecycle events print as JSON lines, the same for tether xmpp and tether signalr:
        {"event":"connected",SESSION} (a new session), {"event":"resumed",SESSION} (the same one
        taken up again: nothing lost), {"event":"connection-lost","kind":K,"reason":R},
        {"event":"attempt-failed","kind":K,"reason":R}, {"event":"reconnecting","attempt":N,
        "delay_ms":D,"last_error":R}, {"event":"waiting-for-network"}, {"event":"suspended",
        "why":"gave-up" or "background","reason":R} (a command line has no one to tap "retry": it
        ends with exit status 1), {"event":"closed","reason":R} (R null after a clean close); K is
        the error's kind, R its message (null when there is none).
        """

    /// The line for `change`; `session` appends the session's fields (after a comma).
    static func line<Session, Failure: ConnectionError>(
        _ change: ConnectionLifecycle<Session, Failure>,
        session: (Session, inout [UInt8]) -> Void
    ) -> String {
        var line: [UInt8] = []
        switch change {
        case .connected(let value), .resumed(let value):
            let name = if case .connected = change { "connected" } else { "resumed" }
            line = Array(#"{"event":"\#(name)","#.utf8)
            session(value, &line)
        case .connectionLost(let error), .attemptFailed(let error):
            let name = if case .connectionLost = change { "connection-lost" } else { "attempt-failed" }
            line = Array(#"{"event":"\#(name)","kind":"#.utf8)
            JSONText.appendString(error.kind.rawValue, to: &line)
            line += #","reason":"#.utf8
            JSONText.appendString(error.message, to: &line)
        case .reconnecting(let attempt, let delay, let lastError):
            line = Array(#"{"event":"reconnecting","attempt":"#.utf8)
            JSONText.appendInteger(Int64(attempt), to: &line)
            line += #","delay_ms":"#.utf8
            JSONText.appendInteger(
                delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000,
                to: &line
            )
            line += #","last_error":"#.utf8
            appendOptional(lastError?.message, to: &line)
        case .waitingForNetwork:
            line = Array(#"{"event":"waiting-for-network""#.utf8)
        case .suspended(let reason):
            line = Array(#"{"event":"suspended","why":"#.utf8)
            switch reason {
            case .gaveUp(let error):
                line += #""gave-up","reason":"#.utf8
                JSONText.appendString(error.message, to: &line)
            case .background:
                line += #""background","reason":null"#.utf8
            }
        case .closed(let error):
            line = Array(#"{"event":"closed","reason":"#.utf8)
            appendOptional(error?.message, to: &line)
        }
        line.append(UInt8(ascii: "}"))
        return String(decoding: line, as: UTF8.self)
    }

    /// A JSON string, or null.
    static func appendOptional(_ text: String?, to line: inout [UInt8]) {
        if let text {
            JSONText.appendString(text, to: &line)
        } else {
            line += "null".utf8
        }
    }
}
