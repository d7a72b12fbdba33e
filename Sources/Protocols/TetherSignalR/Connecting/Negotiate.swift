public import TetherCore
import TetherJSON

/// A transport the server offers in its negotiate response.
public struct AvailableTransport: Hashable, Sendable {
    /// The transport's name: `WebSockets`, `ServerSentEvents` or `LongPolling`.
    public var transport: String
    /// The transfer formats it supports: `Text`, `Binary`.
    public var transferFormats: [String]

    /// Creates a transport entry.
    public init(transport: String, transferFormats: [String]) {
        self.transport = transport
        self.transferFormats = transferFormats
    }

    /// Whether this transport can carry `format`.
    public func supports(_ format: TransferFormat) -> Bool {
        transferFormats.contains(format == .text ? "Text" : "Binary")
    }
}

/// A successful negotiate response (TransportProtocols.md "POST [endpoint-base]/negotiate").
public struct NegotiateResponse: Hashable, Sendable {
    /// The negotiate protocol version the server chose (0 when it sent none).
    public var negotiateVersion: Int
    /// The connection's id, shown to hub code as `Context.ConnectionId`.
    public var connectionId: String
    /// The token that goes into the connect URL's `id=` (the connection id for version 0).
    public var connectionToken: String
    /// The transports the server offers, in its order of preference.
    public var availableTransports: [AvailableTransport]
    /// Whether the server agreed to stateful reconnect.
    public var useStatefulReconnect: Bool

    /// Creates a response.
    public init(
        negotiateVersion: Int,
        connectionId: String,
        connectionToken: String,
        availableTransports: [AvailableTransport],
        useStatefulReconnect: Bool = false
    ) {
        self.negotiateVersion = negotiateVersion
        self.connectionId = connectionId
        self.connectionToken = connectionToken
        self.availableTransports = availableTransports
        self.useStatefulReconnect = useStatefulReconnect
    }

    /// The transport entry named `name`, if offered.
    public func transport(named name: String) -> AvailableTransport? {
        availableTransports.first { $0.transport == name }
    }
}

/// What a negotiate response tells the client to do.
public enum NegotiateOutcome: Hashable, Sendable {
    /// Connect with these details.
    case connect(NegotiateResponse)
    /// Negotiate again at `url`, with `accessToken` (if any) replacing the current token.
    case redirect(url: String, accessToken: String?)
}

/// Parsing negotiate responses and building the negotiate and connect URLs.
public enum Negotiate {
    /// The most redirects a client follows before failing (as the TypeScript client).
    public static let maximumRedirects = 100

    /// The error for the 101st redirect.
    public static let redirectLimitExceeded = HubProtocolError(
        .invalidNegotiateResponse,
        "Negotiate redirection limit exceeded."
    )

    /// The error for a response from an ASP.NET (not Core) SignalR server.
    public static let aspNetSignalRDetected = HubProtocolError(
        .invalidNegotiateResponse,
        "Detected a connection attempt to an ASP.NET SignalR Server. This client only supports connecting to an ASP.NET Core SignalR Server. See https://aka.ms/signalr-core-differences for details."
    )

    /// Parses a negotiate response body.
    ///
    /// A response with `error` throws a `.negotiateRejected` error carrying the server's text; a
    /// response that is not valid throws "Invalid negotiation response received." followed by the
    /// reason; a response with `ProtocolVersion` is an old ASP.NET SignalR server.
    public static func parse(_ body: [UInt8]) throws(HubProtocolError) -> NegotiateOutcome {
        var scanner = JSONScanner(body, range: 0..<body.count, maximumDepth: HubProtocolLimits.defaultMaximumDepth)
        var fields = Fields()
        do {
            try fields.read(&scanner)
        } catch let error as NegotiateFailure {
            switch error {
            case .aspNetSignalR: throw aspNetSignalRDetected
            case .invalid(let reason): throw invalid(reason)
            }
        } catch {
            throw invalid("Error reading JSON.")
        }
        if let url = fields.url { return .redirect(url: url, accessToken: fields.accessToken) }
        if let error = fields.error { throw HubProtocolError(.negotiateRejected, error) }
        guard let connectionId = fields.connectionId else { throw invalid("Missing required property 'connectionId'.") }
        let version = fields.negotiateVersion ?? 0
        let token: String
        if version > 0 {
            guard let connectionToken = fields.connectionToken else {
                throw invalid("Missing required property 'connectionToken'.")
            }
            token = connectionToken
        } else {
            token = connectionId
        }
        guard let transports = fields.availableTransports else {
            throw invalid("Missing required property 'availableTransports'.")
        }
        return .connect(
            NegotiateResponse(
                negotiateVersion: version,
                connectionId: connectionId,
                connectionToken: token,
                availableTransports: transports,
                useStatefulReconnect: fields.useStatefulReconnect
            )
        )
    }

    static func invalid(_ reason: String) -> HubProtocolError {
        HubProtocolError(.invalidNegotiateResponse, "Invalid negotiation response received. \(reason)")
    }

    enum NegotiateFailure: Error {
        case aspNetSignalR
        case invalid(String)
    }

    struct Fields {
        var negotiateVersion: Int?
        var connectionId: String?
        var connectionToken: String?
        var availableTransports: [AvailableTransport]?
        var url: String?
        var accessToken: String?
        var error: String?
        var useStatefulReconnect = false

        mutating func read(_ scanner: inout JSONScanner) throws {
            try Negotiate.readObject(&scanner) { name, kind, scanner in
                switch name {
                case "negotiateVersion":
                    negotiateVersion = try Negotiate.readInteger(&scanner, kind, name)
                case "connectionId": connectionId = try Negotiate.readString(&scanner, kind, name)
                case "connectionToken": connectionToken = try Negotiate.readString(&scanner, kind, name)
                case "url": url = try Negotiate.readString(&scanner, kind, name)
                case "accessToken": accessToken = try Negotiate.readString(&scanner, kind, name)
                case "error": error = try Negotiate.readString(&scanner, kind, name)
                case "useStatefulReconnect":
                    guard kind == .trueLiteral || kind == .falseLiteral else {
                        throw NegotiateFailure.invalid("Expected '\(name)' to be of type Boolean.")
                    }
                    useStatefulReconnect = kind == .trueLiteral
                    try scanner.skipValue()
                case "availableTransports":
                    availableTransports = try Negotiate.readTransports(&scanner, kind)
                case "ProtocolVersion":
                    throw NegotiateFailure.aspNetSignalR
                default:
                    try scanner.skipValue()
                }
            }
        }
    }

    static func readObject(
        _ scanner: inout JSONScanner,
        _ body: (String, JSONTokenKind, inout JSONScanner) throws -> Void
    ) throws {
        guard let kind = scanner.peekKind(), scanner.firstTokenIsValid() else { throw JSONScanner.Failure() }
        guard kind == .object else {
            throw NegotiateFailure.invalid("Unexpected JSON Token Type '\(kind.rawValue)'. Expected a JSON Object.")
        }
        scanner.position += 1
        let bytes = scanner.bytes
        if scanner.consume(UInt8(ascii: "}")) { return }
        repeat {
            guard scanner.peek() == UInt8(ascii: "\"") else { throw JSONScanner.Failure() }
            let key = try scanner.readString()
            guard scanner.consume(UInt8(ascii: ":")), let kind = scanner.peekKind() else { throw JSONScanner.Failure() }
            try body(JSONScanner.string(bytes, key), kind, &scanner)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw JSONScanner.Failure() }
    }

    static func readString(_ scanner: inout JSONScanner, _ kind: JSONTokenKind, _ name: String) throws -> String? {
        if kind == .null {
            try scanner.readLiteral("null")
            return nil
        }
        guard kind == .string else { throw NegotiateFailure.invalid("Expected '\(name)' to be of type String.") }
        return JSONScanner.string(scanner.bytes, try scanner.readString())
    }

    static func readInteger(_ scanner: inout JSONScanner, _ kind: JSONTokenKind, _ name: String) throws -> Int {
        guard kind == .number else { throw NegotiateFailure.invalid("Expected '\(name)' to be of type Number.") }
        let number = try scanner.readNumber()
        guard number.isInteger, let value = JSONScanner.int64(scanner.bytes, number.range),
            let int = Int(exactly: value)
        else {
            throw NegotiateFailure.invalid("Expected '\(name)' to be of type Number.")
        }
        return int
    }

    static func readTransports(_ scanner: inout JSONScanner, _ kind: JSONTokenKind) throws -> [AvailableTransport] {
        guard kind == .array else {
            throw NegotiateFailure.invalid("Expected 'availableTransports' to be of type Array.")
        }
        scanner.position += 1
        var transports: [AvailableTransport] = []
        if scanner.consume(UInt8(ascii: "]")) { return transports }
        repeat {
            var transport: String?
            var formats: [String]?
            try readObject(&scanner) { name, kind, scanner in
                switch name {
                case "transport": transport = try readString(&scanner, kind, name)
                case "transferFormats":
                    guard kind == .array else {
                        throw NegotiateFailure.invalid("Expected 'transferFormats' to be of type Array.")
                    }
                    scanner.position += 1
                    var list: [String] = []
                    if !scanner.consume(UInt8(ascii: "]")) {
                        repeat {
                            guard let itemKind = scanner.peekKind(),
                                let format = try readString(&scanner, itemKind, "transferFormats")
                            else { throw NegotiateFailure.invalid("Expected 'transferFormats' to be of type String.") }
                            list.append(format)
                        } while scanner.consume(UInt8(ascii: ","))
                        guard scanner.consume(UInt8(ascii: "]")) else { throw JSONScanner.Failure() }
                    }
                    formats = list
                default: try scanner.skipValue()
                }
            }
            guard let transport else { throw NegotiateFailure.invalid("Missing required property 'transport'.") }
            guard let formats else { throw NegotiateFailure.invalid("Missing required property 'transferFormats'.") }
            transports.append(AvailableTransport(transport: transport, transferFormats: formats))
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "]")) else { throw JSONScanner.Failure() }
        return transports
    }

    // MARK: - URLs

    /// The negotiate URL for the hub at `url`: `/negotiate` appended to the path, the existing
    /// query kept, then `negotiateVersion=1` and, when asked for, `useStatefulReconnect=true`.
    public static func negotiateURL(for url: String, statefulReconnect: Bool = false) -> String {
        let (base, query) = split(url)
        var result = base.hasSuffix("/") ? base + "negotiate" : base + "/negotiate"
        result += "?"
        if let query, !query.isEmpty { result += query + "&" }
        result += "negotiateVersion=1"
        if statefulReconnect { result += "&useStatefulReconnect=true" }
        return result
    }

    /// The URL the transport connects to: `url` plus `id=<token>` (percent-encoded) when a
    /// negotiate gave a token.
    public static func connectURL(for url: String, connectionToken: String?) -> String {
        let (base, query) = split(url)
        guard let connectionToken else { return query.map { base + "?" + $0 } ?? base }
        var result = base + "?"
        if let query, !query.isEmpty { result += query + "&" }
        return result + "id=" + percentEncode(connectionToken)
    }

    /// A negotiate redirect's `url` with the app's own query parameters (those of `original`
    /// whose names the redirect does not set) appended, so that a tenant or API key the app put
    /// in its hub URL survives the redirect.
    public static func redirectURL(_ url: String, keepingQueryOf original: String) -> String {
        guard let appQuery = split(original).query, !appQuery.isEmpty else { return url }
        let (base, query) = split(url)
        let present = Set(
            (query ?? "").split(separator: "&").map { $0.split(separator: "=", maxSplits: 1).first ?? "" }
        )
        let kept = appQuery.split(separator: "&").filter {
            !present.contains($0.split(separator: "=", maxSplits: 1).first ?? "")
        }
        let parts = (query.map { [$0] } ?? []).filter { !$0.isEmpty } + kept.map(String.init)
        return parts.isEmpty ? base : base + "?" + parts.joined(separator: "&")
    }

    /// `url` with `http` → `ws` and `https` → `wss` (schemes match case-insensitively, RFC 3986
    /// §3.1; other schemes unchanged).
    public static func webSocketURL(for url: String) -> String {
        if hasScheme(url, "https") { return "wss://" + url.dropFirst(8) }
        if hasScheme(url, "http") { return "ws://" + url.dropFirst(7) }
        return url
    }

    /// Whether `url` starts with `scheme` and `://`, the scheme matched case-insensitively.
    static func hasScheme(_ url: String, _ scheme: String) -> Bool {
        let prefix = url.utf8.prefix(scheme.utf8.count + 3)
        guard prefix.count == scheme.utf8.count + 3, prefix.dropFirst(scheme.utf8.count).elementsEqual("://".utf8)
        else { return false }
        return zip(prefix, scheme.utf8).allSatisfy { $0 | 0x20 == $1 | 0x20 }
    }

    /// Splits off the query (and drops a fragment).
    static func split(_ url: String) -> (base: String, query: String?) {
        let withoutFragment =
            url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? url
        let parts = withoutFragment.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return (String(parts[0]), parts.count > 1 ? String(parts[1]) : nil)
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func percentEncode(_ value: String) -> String {
        var result = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                result += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return result
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
