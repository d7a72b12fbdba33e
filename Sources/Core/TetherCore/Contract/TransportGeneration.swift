/// Which transport (TCP connection, WebSocket) an input belongs to.
///
/// A machine hands out a new generation with every connect action, and every transport input
/// (connected, bytes, closed, TLS established) names the generation it came from. Input from any
/// other generation than the current one is ignored, so a late callback from an abandoned
/// attempt, from before `stop()` and `start()`, or from the connection a reconnect replaced, can
/// never touch the new connection (`Specs/machine-contract.md`).
public struct TransportGeneration: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number, increasing from 1 with every connect action of one machine.
    public let value: UInt64

    /// A generation with the number `value`.
    public init(_ value: UInt64) {
        self.value = value
    }

    /// The generation after this one.
    public var next: TransportGeneration { TransportGeneration(value &+ 1) }

    public static func < (lhs: TransportGeneration, rhs: TransportGeneration) -> Bool { lhs.value < rhs.value }

    public var description: String { "#\(value)" }
}

/// A host and TCP port to connect to.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    /// A DNS name or an IP address literal (IPv6 without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int

    /// An endpoint.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host`, `host:port`, `[v6]` or `[v6]:port` (as in XEP-0198's `location` and RFC
    /// 6120's `see-other-host`), taking `defaultPort` when none is given; nil for an empty host or
    /// a port outside 1…65535.
    public init?(parsing text: String, defaultPort: Int) {
        var host = Substring(text)
        var port = defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { return nil }
                port = value
            }
        } else if let colon = host.lastIndex(of: ":"), host.firstIndex(of: ":") == colon {
            guard let value = Int(host[host.index(after: colon)...]) else { return nil }
            port = value
            host = host[..<colon]
        }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
        self.init(host: String(host), port: port)
    }

    /// `host:port` (`[v6]:port` for IPv6 literals).
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
