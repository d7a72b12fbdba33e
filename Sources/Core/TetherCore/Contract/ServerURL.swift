/// An `http(s)://` or `ws(s)://` URL taken apart for a request: where to connect, whether TLS
/// goes first, and the `Host` header and request target. A SignalR hub's URL, and the endpoint of
/// XMPP over WebSocket (RFC 7395).
public struct ServerURL: Hashable, Sendable, CustomStringConvertible {
    /// The scheme, lowercased: `http`, `https`, `ws` or `wss`.
    public var scheme: String
    /// `https`/`wss`: TLS from the first byte, the certificate checked for `host`.
    public var isSecure: Bool { scheme == "https" || scheme == "wss" }
    /// Whether the scheme is `ws` or `wss`.
    public var isWebSocket: Bool { scheme == "ws" || scheme == "wss" }
    /// The host (a name, or an address; IPv6 without brackets).
    public var host: String
    /// The port (the scheme's default when the URL names none).
    public var port: Int
    /// The path and query (`/hub/negotiate?negotiateVersion=1`), at least `/`.
    public var target: String

    /// The `Host` header's value (the port only when it is not the scheme's default).
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// Where to connect.
    public var endpoint: Endpoint { Endpoint(host: host, port: port) }

    /// The URL again, without user information or fragment.
    public var description: String { "\(scheme)://\(hostHeader)\(target)" }

    /// The URL for a log or an error: `description` with the value of any `access_token` query
    /// parameter replaced by `***` (an Azure SignalR redirect, or a server that wants the token in
    /// the query, puts it there).
    public var redacted: String { Self.redacted(description) }

    /// `url` with the value of any `access_token` query parameter replaced by `***`.
    public static func redacted(_ url: String) -> String {
        guard let query = url.firstIndex(of: "?") else { return url }
        let parameters = url[url.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
        let cleaned = parameters.map { parameter -> String in
            let name = parameter.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            return name.lowercased() == "access_token" ? name + "=***" : String(parameter)
        }
        return url[..<query] + "?" + cleaned.joined(separator: "&")
    }

    /// Parses `text`; nil unless it is an absolute http, https, ws or wss URL (the scheme
    /// matched case-insensitively) with a host.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        scheme = text[..<colon].lowercased()
        guard ["http", "https", "ws", "wss"].contains(scheme) else { return nil }
        var rest = text[text.index(colon, offsetBy: 3)...]
        if let fragment = rest.firstIndex(of: "#") { rest = rest[..<fragment] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let path = rest[authorityEnd...]
        target = path.isEmpty ? "/" : (path.hasPrefix("?") ? "/" + path : String(path))
        let secure = scheme == "https" || scheme == "wss"
        guard let endpoint = Endpoint(parsing: String(authority), defaultPort: secure ? 443 : 80) else { return nil }
        host = endpoint.host
        port = endpoint.port
    }
}
