import Foundation
@_spi(TetherInternal) import TetherCore
import TetherJSON

/// `--health SECONDS`: the connection's health as a JSON line, the same for both commands.
enum HealthLine {
    static let help = """
        --health S prints the connection's health every S seconds as {"event":"health",
        "state":…,"phase":…,"online_ms":…,"rtt_ms":…,"srtt_ms":…,"dead_link_detected_ms":…,
        "reconnect_attempts":…,"reconnect_reasons":[…],"resumes":…,"failed_resumes":…,
        "bytes_sent":…,"bytes_received":…,"messages_sent":…,"messages_received":…,
        "awaiting_ack":…,"unsent_bytes":…,"transport":…,"tls_version":…,"server":…,
        "failing_servers":[…]} (times in milliseconds, null when not known; "server" is the one the
        connection or its attempt is on, "failing_servers" those of the DNS lookup that failed before
        a stream and are tried after the others).
        """

    /// The line for `health`.
    static func line(_ health: ConnectionHealth) -> String {
        var line = Array(#"{"event":"health","state":"#.utf8)
        JSONText.appendString(health.state, to: &line)
        line += #","phase":"#.utf8
        JSONText.appendString(health.phase.rawValue, to: &line)
        for (name, value) in [
            ("online_ms", health.timeOnline), ("rtt_ms", health.lastRoundTrip), ("srtt_ms", health.smoothedRoundTrip),
            ("dead_link_detected_ms", health.lastDeadLinkDetection),
        ] {
            line += ",\"\(name)\":".utf8
            if let value {
                line += String(format: "%.3f", Double(value.totalNanoseconds) / 1e6).utf8
            } else {
                line += "null".utf8
            }
        }
        line += #","reconnect_attempts":"#.utf8
        JSONText.appendInteger(Int64(health.reconnectAttempts), to: &line)
        line += #","reconnect_reasons":"#.utf8
        appendStrings(health.recentReconnectReasons, to: &line)
        for (name, value) in [
            ("resumes", health.resumes), ("failed_resumes", health.failedResumes), ("bytes_sent", health.bytesSent),
            ("bytes_received", health.bytesReceived), ("messages_sent", health.messagesSent),
            ("messages_received", health.messagesReceived), ("awaiting_ack", health.awaitingAcknowledgement),
            ("unsent_bytes", health.unsentBytes), ("calls_waiting", health.callsWaitingForRoom),
        ] {
            line += ",\"\(name)\":".utf8
            JSONText.appendInteger(Int64(value), to: &line)
        }
        for (name, value) in [
            ("transport", health.transport), ("tls_version", health.tlsVersion), ("server", health.server),
        ] {
            line += ",\"\(name)\":".utf8
            if let value {
                JSONText.appendString(value, to: &line)
            } else {
                line += "null".utf8
            }
        }
        line += #","failing_servers":"#.utf8
        appendStrings(health.failingServers, to: &line)
        line.append(UInt8(ascii: "}"))
        return String(decoding: line, as: UTF8.self)
    }

    /// A JSON array of strings.
    static func appendStrings(_ strings: [String], to line: inout [UInt8]) {
        line.append(UInt8(ascii: "["))
        for (index, text) in strings.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            JSONText.appendString(text, to: &line)
        }
        line.append(UInt8(ascii: "]"))
    }
}
