@_spi(TetherInternal) public import TetherCore
import TetherJSON

/// The first message a client sends: which hub protocol and version it speaks.
public struct HandshakeRequest: Hashable, Sendable {
    /// The hub protocol's name (`json`, `messagepack`).
    public var protocolName: String
    /// The protocol version: 1, or 2 when stateful reconnect was negotiated.
    public var version: Int

    /// Creates a request.
    public init(protocolName: String, version: Int) {
        self.protocolName = protocolName
        self.version = version
    }

    /// Appends `{"protocol":"…","version":N}` and the record separator to `bytes`.
    public func write(into bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"protocol":"#.utf8)
        JSONText.appendString(protocolName, to: &bytes)
        bytes.append(contentsOf: #","version":"#.utf8)
        JSONText.appendInteger(Int64(version), to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        bytes.append(JSONHubProtocol.recordSeparator)
    }

    /// Parses the first record of `bytes` (see the `Span` form).
    public static func parse(
        _ bytes: [UInt8]
    ) throws(HubProtocolError) -> (request: HandshakeRequest, consumed: Int)? {
        try parse(bytes.backDeployedSpan)
    }

    /// Parses the first record of `bytes`: nil if no record separator has arrived yet, else the
    /// request and the number of bytes it used (separator included).
    public static func parse(
        _ bytes: Span<UInt8>
    ) throws(HubProtocolError) -> (request: HandshakeRequest, consumed: Int)? {
        guard let record = HandshakeRecord(bytes) else { return nil }
        var protocolName: String?
        var version: Int?
        try record.readProperties { (name, kind, scanner) throws(HubProtocolError) in
            switch name {
            case "protocol":
                guard kind == .string else { throw HandshakeRecord.expected("protocol", "String") }
                protocolName = try record.readString(&scanner)
            case "version":
                guard kind == .number else { throw HandshakeRecord.expected("version", "Number") }
                version = try record.readInteger(&scanner, "version")
            default:
                try record.skip(&scanner)
            }
        }
        guard let protocolName else { throw record.missing("protocol") }
        guard let version else { throw record.missing("version") }
        return (HandshakeRequest(protocolName: protocolName, version: version), record.consumed)
    }
}

/// The server's answer to the handshake: success, or an error text.
public struct HandshakeResponse: Hashable, Sendable {
    /// The server's error, or nil when the handshake succeeded.
    public var error: String?
    /// The server's minor protocol version, when it sends one.
    public var minorVersion: Int?

    /// Creates a response.
    public init(error: String? = nil, minorVersion: Int? = nil) {
        self.error = error
        self.minorVersion = minorVersion
    }

    /// Appends `{}` (or `{"error":"…"}`) and the record separator to `bytes`.
    public func write(into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "{"))
        if let error {
            bytes.append(contentsOf: #""error":"#.utf8)
            JSONText.appendString(error, to: &bytes)
        }
        if let minorVersion {
            if error != nil { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #""minorVersion":"#.utf8)
            JSONText.appendInteger(Int64(minorVersion), to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        bytes.append(JSONHubProtocol.recordSeparator)
    }

    /// Parses the first record of `bytes` (see the `Span` form).
    public static func parse(
        _ bytes: [UInt8]
    ) throws(HubProtocolError) -> (response: HandshakeResponse, consumed: Int)? {
        try parse(bytes.backDeployedSpan)
    }

    /// Parses the first record of `bytes`: nil if no record separator has arrived yet, else the
    /// response and the number of bytes it used; the bytes after it are ordinary hub messages.
    public static func parse(
        _ bytes: Span<UInt8>
    ) throws(HubProtocolError) -> (response: HandshakeResponse, consumed: Int)? {
        guard let record = HandshakeRecord(bytes) else { return nil }
        var response = HandshakeResponse()
        try record.readProperties { (name, kind, scanner) throws(HubProtocolError) in
            switch name {
            case "error":
                guard kind == .string else { throw HandshakeRecord.expected("error", "String") }
                response.error = try record.readString(&scanner)
            case "minorVersion":
                guard kind == .number else { throw HandshakeRecord.expected("minorVersion", "Number") }
                response.minorVersion = try record.readInteger(&scanner, "minorVersion")
            case "type":
                throw HubProtocolError(.invalidHandshake, "Expected a handshake response from the server.")
            default:
                try record.skip(&scanner)
            }
        }
        return (response, record.consumed)
    }
}

/// One handshake record: the JSON object before the first record separator.
struct HandshakeRecord {
    let bytes: [UInt8]
    /// Bytes used, separator included.
    let consumed: Int

    init?(_ input: Span<UInt8>) {
        var index = 0
        while index < input.count, input[index] != JSONHubProtocol.recordSeparator { index += 1 }
        guard index < input.count else { return nil }
        var bytes: [UInt8] = []
        bytes.append(copying: input.extracting(0..<index))
        self.bytes = bytes
        consumed = index + 1
    }

    static func expected(_ name: String, _ type: String) -> HubProtocolError {
        HubProtocolError(.invalidHandshake, "Expected '\(name)' to be of type \(type).")
    }

    static let errorReadingJSON = HubProtocolError(.invalidHandshake, "Error reading JSON.")

    func missing(_ name: String) -> HubProtocolError {
        HubProtocolError(
            .invalidHandshake,
            "Missing required property '\(name)'. Message content: \(String(decoding: bytes, as: UTF8.self))"
        )
    }

    func readProperties(
        _ body: (String, JSONTokenKind, inout JSONScanner) throws(HubProtocolError) -> Void
    ) throws(HubProtocolError) {
        var scanner = JSONScanner(bytes, range: 0..<bytes.count, maximumDepth: HubProtocolLimits.defaultMaximumDepth)
        guard let kind = scanner.peekKind(), scanner.firstTokenIsValid() else { throw Self.errorReadingJSON }
        guard kind == .object else {
            throw HubProtocolError(
                .invalidHandshake,
                "Unexpected JSON Token Type '\(kind.rawValue)'. Expected a JSON Object."
            )
        }
        scanner.position += 1
        if !scanner.consume(UInt8(ascii: "}")) {
            repeat {
                guard scanner.peek() == UInt8(ascii: "\""), let key = try? scanner.readString(),
                    scanner.consume(UInt8(ascii: ":")), let valueKind = scanner.peekKind()
                else { throw Self.errorReadingJSON }
                try body(JSONScanner.string(bytes, key), valueKind, &scanner)
            } while scanner.consume(UInt8(ascii: ","))
            guard scanner.consume(UInt8(ascii: "}")) else { throw Self.errorReadingJSON }
        }
        guard scanner.peek() == nil else { throw Self.errorReadingJSON }
    }

    func readString(_ scanner: inout JSONScanner) throws(HubProtocolError) -> String {
        guard let token = try? scanner.readString() else { throw Self.errorReadingJSON }
        return JSONScanner.string(bytes, token)
    }

    func readInteger(_ scanner: inout JSONScanner, _ name: String) throws(HubProtocolError) -> Int {
        guard let number = try? scanner.readNumber() else { throw Self.errorReadingJSON }
        guard number.isInteger, let value = JSONScanner.int64(bytes, number.range), let int = Int(exactly: value) else {
            throw Self.expected(name, "Number")
        }
        return int
    }

    func skip(_ scanner: inout JSONScanner) throws(HubProtocolError) {
        guard (try? scanner.skipValue()) != nil else { throw Self.errorReadingJSON }
    }
}
