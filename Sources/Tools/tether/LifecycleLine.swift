import Dispatch
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

/// Where a connection command prints its client's events, on one queue (so lines come out in the
/// order things happened), counting what `listen` waits for (messages, calls) and watching for
/// the connection's end: closed, or suspended (a command line has no one to tap "retry", nor a
/// background). The same for `tether xmpp` and `tether signalr`.
class EventPrinter<Failure: ConnectionError>: @unchecked Sendable {
    // `received`, `ended` and `failure` are touched only on `queue`.
    let queue: DispatchQueue
    let output: @Sendable (String) -> Void
    private var received = 0
    private var ended = false
    private var failure: Failure?

    init(label: String, output: @escaping @Sendable (String) -> Void) {
        queue = DispatchQueue(label: label)
        self.output = output
    }

    /// Prints `line` after everything queued so far.
    func print(_ line: String) {
        queue.sync { output(line) }
    }

    /// Waits until every line queued so far is printed.
    func flush() {
        queue.sync {}
    }

    /// On `queue`: prints a lifecycle change (`session` writes the session's fields) and notes
    /// the connection's end.
    func printLifecycle<Session>(
        _ change: ConnectionLifecycle<Session, Failure>,
        session: (Session, inout [UInt8]) -> Void
    ) {
        switch change {
        case .suspended(.gaveUp(let error)):
            ended = true
            failure = error
        case .suspended(.background):
            ended = true
            failure = Failure(.notConnected, "The connection closed for the background.")
        case .closed(let error):
            ended = true
            failure = error
        case .connected, .resumed, .connectionLost, .attemptFailed, .reconnecting, .waitingForNetwork:
            break
        }
        output(LifecycleLine.line(change, session: session))
    }

    /// On `queue`: one more of what `listen` waits for.
    func countReceived() {
        received += 1
    }

    /// Waits until `count` were received or `seconds` passed (forever when both are nil);
    /// returns the error when the connection ended first.
    func waitForReceived(count: Int?, seconds: Double?) async -> Failure? {
        let deadline = seconds.map { ContinuousClock.now + .milliseconds(Int64($0 * 1000)) }
        while true {
            let (received, ended, failure) = queue.sync { (self.received, self.ended, self.failure) }
            if let count, received >= count { return nil }
            if ended { return failure ?? Failure(.notConnected, "The connection closed.") }
            if let deadline, ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
