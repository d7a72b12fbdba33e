public import TetherCore

/// A SignalR transport: how the hub protocol's frames travel (TransportProtocols.md). The raw
/// values are the names the negotiate response uses.
public enum HubTransport: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// One WebSocket both ways: the fastest, and the only one with stateful reconnect and
    /// skip-negotiation.
    case webSockets = "WebSockets"
    /// A `text/event-stream` response from the server, HTTP POSTs to it; text only.
    case serverSentEvents = "ServerSentEvents"
    /// HTTP long polls from the server, POSTs to it.
    case longPolling = "LongPolling"

    /// Whether the transport can carry `format` (Server-Sent Events carry text only).
    public func carries(_ format: TransferFormat) -> Bool {
        self != .serverSentEvents || format == .text
    }

    /// The server sends nothing on its own to a long-polling client between polls, and each poll
    /// answers within the server's poll timeout: the protocol's keep-alive pings and server
    /// timeout are not used ("inherent keep-alive").
    public var hasInherentKeepAlive: Bool { self == .longPolling }

    /// What it is called in texts: "WebSocket", "Server-Sent Events", "long polling".
    public var description: String {
        switch self {
        case .webSockets: "WebSocket"
        case .serverSentEvents: "Server-Sent Events"
        case .longPolling: "long polling"
        }
    }

    /// `description` at the start of a sentence.
    var capitalizedDescription: String {
        self == .longPolling ? "Long polling" : description
    }
}
