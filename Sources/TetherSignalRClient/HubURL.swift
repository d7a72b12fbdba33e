import TetherCore

/// An `http(s)://` or `ws(s)://` URL taken apart for a request: where to connect, whether TLS
/// goes first, and the `Host` header and request target.
struct HubURL: Hashable, Sendable {
    /// `http`/`ws` (cleartext) or `https`/`wss` (TLS).
    var isSecure: Bool
    /// The host (a name, or an address; IPv6 without brackets).
    var host: String
    var port: Int
    /// The path and query (`/hub/negotiate?negotiateVersion=1`), at least `/`.
    var target: String

    /// The `Host` header's value (the port only when it is not the scheme's default).
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    var endpoint: Endpoint { Endpoint(host: host, port: port) }

    /// Parses `text`; nil unless it is an absolute http, https, ws or wss URL (the scheme
    /// matched case-insensitively) with a host.
    init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        let scheme = text[..<colon].lowercased()
        switch scheme {
        case "http", "ws": isSecure = false
        case "https", "wss": isSecure = true
        default: return nil
        }
        var rest = text[text.index(colon, offsetBy: 3)...]
        if let fragment = rest.firstIndex(of: "#") { rest = rest[..<fragment] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let path = rest[authorityEnd...]
        target = path.isEmpty ? "/" : (path.hasPrefix("?") ? "/" + path : String(path))
        guard let endpoint = Endpoint(parsing: String(authority), defaultPort: isSecure ? 443 : 80) else { return nil }
        host = endpoint.host
        port = endpoint.port
    }
}
