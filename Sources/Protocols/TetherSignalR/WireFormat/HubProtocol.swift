@_spi(TetherInternal) public import TetherCore

/// How a transport must carry a hub protocol's messages (TransportProtocols.md "transfer format").
public typealias TransferFormat = MessageFormat

/// A SignalR hub protocol: how hub messages become bytes and back.
///
/// `JSONHubProtocol` and `MessagePackHubProtocol` are the two that ASP.NET Core ships. Both are
/// stateless values; the incremental decoding state lives in the `Parser` each one makes.
public protocol HubProtocol: Sendable {
    /// The incremental decoder for a byte stream of this protocol.
    associatedtype Parser: HubMessageParser

    /// The protocol name sent in the handshake (`json`, `messagepack`).
    var name: String { get }
    /// The highest protocol version implemented (2: Ack and Sequence for stateful reconnect).
    var version: Int { get }
    /// The transfer format the transport must provide.
    var transferFormat: TransferFormat { get }
    /// The encoding of payload values.
    var valueEncoding: ValueEncoding { get }

    /// A new incremental decoder.
    func makeParser() -> Parser
    /// Appends the framed encoding of `message` to `bytes`.
    func write(_ message: HubMessage, into bytes: inout [UInt8])
}

/// An incremental decoder of hub messages from a byte stream: feed bytes as they arrive, in any
/// split, and pull complete messages. Any split of the same stream yields the same messages.
public protocol HubMessageParser: Sendable {
    /// Adds received bytes (copied).
    mutating func append(_ bytes: Span<UInt8>)
    /// Adds a received array. The package's parsers keep the array itself (the messages read from
    /// it then reference it, as they reference the parser's own buffer otherwise) instead of
    /// copying it, unless bytes of an unfinished message are pending; then only the array's
    /// bytes that complete that message are copied. The default implementation copies.
    mutating func append(_ bytes: [UInt8])
    /// The next complete message, or nil if more bytes are needed. Unknown message types are
    /// skipped. After an error the parser stays failed: every later call throws the same error.
    mutating func next() throws(HubProtocolError) -> HubMessage?
    /// The next complete message, with its payload offered to `binder` while it is read (see
    /// `HubMessageBinder`); nil if more bytes are needed. Errors and skipped messages are those of
    /// `next()`.
    mutating func next<Binder: HubMessageBinder>(binding binder: inout Binder) throws(HubProtocolError) -> HubMessage?
    /// Whether bytes of an unfinished message are buffered (at the end of input that is the
    /// error `HubProtocolError.incomplete`).
    var hasPartialMessage: Bool { get }
}

extension HubMessageParser {
    /// Adds a received array (copied: `append(_:)` with its span).
    public mutating func append(_ bytes: [UInt8]) {
        append(bytes.backDeployedSpan)
    }

    /// Adds received bytes (a slice of a capture, say).
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        append(bytes.span)
    }
}

/// The bytes a parser has received but not yet consumed.
///
/// Messages keep slices of `storage`, so a chunk is never modified once a message may reference
/// it: consumed bytes are dropped by starting a new array for the next chunk, and only an
/// unfinished message's bytes are carried over. A received array (`append(_:completing:)`) is
/// kept itself, not copied, when nothing is pending; when an unfinished message is pending and
/// the array's first bytes complete it, only those bytes are copied (after the pending ones) and
/// the array waits behind them (`queued`), taken up by `advance()` once they are consumed.
struct ReceiveBuffer: Sendable {
    var storage: [UInt8] = []
    /// Offset of the first byte not yet consumed.
    var start = 0
    /// A received array whose bytes from `queuedStart` on follow those of `storage`; empty when
    /// there is none. While there is one, the pending bytes of `storage` end with a whole message.
    private(set) var queued: [UInt8] = []
    private(set) var queuedStart = 0

    var pendingCount: Int { storage.count - start + queued.count - queuedStart }

    /// Takes up the queued array once `storage` is consumed; returns whether it did (offsets into
    /// the pending bytes then start again from the new `start`).
    @inline(__always)
    mutating func advance() -> Bool {
        guard start == storage.count, !queued.isEmpty else { return false }
        storage = queued
        start = queuedStart
        queued = []
        queuedStart = 0
        return true
    }

    /// Adds a received array, keeping the array itself when nothing is pending. When something
    /// is, `completing` is asked how many of the array's first bytes, after the pending ones, end
    /// a whole message (so that the pending bytes and those are whole messages), or nil when it
    /// cannot tell: only those are copied (all of the array for nil, as for a span).
    mutating func append(
        _ bytes: [UInt8],
        completing: (_ pending: Span<UInt8>, _ received: Span<UInt8>) -> Int?
    ) {
        guard queued.isEmpty else { return append(bytes.backDeployedSpan) }
        if start == storage.count {
            storage = bytes
            start = 0
            return
        }
        let held = storage
        let pending = held.backDeployedSpan.extracting(start..<held.count)
        guard let count = completing(pending, bytes.backDeployedSpan), count > 0, count < bytes.count else {
            return append(bytes.backDeployedSpan)
        }
        var carried: [UInt8] = []
        carried.reserveCapacity(pending.count + count)
        carried.append(copying: pending)
        carried.append(copying: bytes.backDeployedSpan.extracting(0..<count))
        storage = carried
        start = 0
        queued = bytes
        queuedStart = count
    }

    /// Adds received bytes (copied).
    mutating func append(_ bytes: Span<UInt8>) {
        if !queued.isEmpty {
            // Bytes beyond the queued array: everything pending goes into one array.
            var fresh: [UInt8] = []
            fresh.reserveCapacity(pendingCount + bytes.count)
            fresh.append(contentsOf: storage[start...])
            fresh.append(contentsOf: queued[queuedStart...])
            fresh.append(copying: bytes)
            storage = fresh
            queued = []
            queuedStart = 0
        } else if start == storage.count {
            var fresh: [UInt8] = []
            fresh.append(copying: bytes)
            storage = fresh
        } else if start > 0 {
            var fresh: [UInt8] = []
            fresh.reserveCapacity(pendingCount + bytes.count)
            fresh.append(contentsOf: storage[start...])
            fresh.append(copying: bytes)
            storage = fresh
        } else {
            storage.append(copying: bytes)
        }
        start = 0
    }
}

/// Either of the two hub protocols, as a plain value: what a connection machine holds, so that
/// the machine itself is not generic (generic code used from another module runs unspecialised,
/// with a metadata lookup on every call).
public enum AnyHubProtocol: Sendable {
    /// The `json` protocol.
    case json(JSONHubProtocol)
    /// The `messagepack` protocol.
    case messagePack(MessagePackHubProtocol)

    /// The protocol name sent in the handshake.
    public var name: String {
        switch self {
        case .json(let json): json.name
        case .messagePack(let messagePack): messagePack.name
        }
    }

    /// The transfer format the transport must provide.
    public var transferFormat: TransferFormat {
        switch self {
        case .json: .text
        case .messagePack: .binary
        }
    }

    /// The encoding of payload values.
    public var valueEncoding: ValueEncoding {
        switch self {
        case .json: .json
        case .messagePack: .messagePack
        }
    }

    /// The largest hub message accepted (the protocol's own limit). The driver applies the same
    /// limit to each WebSocket message, so that this is the one place it is set.
    public var maximumMessageSize: Int {
        get {
            switch self {
            case .json(let json): json.maximumMessageSize
            case .messagePack(let messagePack): messagePack.maximumMessageSize
            }
        }
        set {
            switch self {
            case .json(var json):
                json.maximumMessageSize = newValue
                self = .json(json)
            case .messagePack(var messagePack):
                messagePack.maximumMessageSize = newValue
                self = .messagePack(messagePack)
            }
        }
    }

    /// A new incremental decoder.
    public func makeParser() -> AnyHubMessageParser {
        switch self {
        case .json(let json): AnyHubMessageParser(json: json.makeParser())
        case .messagePack(let messagePack): AnyHubMessageParser(messagePack: messagePack.makeParser())
        }
    }

    static let jsonPing = Array(#"{"type":6}"#.utf8) + [0x1E]
    static let messagePackPing: [UInt8] = [0x02, 0x91, 0x06]

    /// The framed Ping message, shared: keep-alives are the most frequent thing a connection
    /// sends, and need not allocate.
    var encodedPing: [UInt8] {
        switch self {
        case .json: Self.jsonPing
        case .messagePack: Self.messagePackPing
        }
    }

    /// Appends the framed encoding of `message` to `bytes`.
    public func write(_ message: HubMessage, into bytes: inout [UInt8]) {
        switch self {
        case .json(let json): json.write(message, into: &bytes)
        case .messagePack(let messagePack): messagePack.write(message, into: &bytes)
        }
    }
}

/// The parser of either hub protocol (the one its `AnyHubProtocol` made).
public enum AnyHubMessageParser: HubMessageParser {
    /// A `json` parser.
    case json(JSONHubMessageParser)
    /// A `messagepack` parser.
    case messagePack(MessagePackHubMessageParser)

    init(json: JSONHubMessageParser) {
        self = .json(json)
    }

    init(messagePack: MessagePackHubMessageParser) {
        self = .messagePack(messagePack)
    }

    // The payload is moved out (`consume self`) and back, so that it is changed while uniquely
    // referenced: binding it from a still-live `self` would share its buffer and copy it on the
    // first change.

    public mutating func append(_ bytes: Span<UInt8>) {
        switch consume self {
        case .json(var parser):
            parser.append(bytes)
            self = .json(parser)
        case .messagePack(var parser):
            parser.append(bytes)
            self = .messagePack(parser)
        }
    }

    public mutating func append(_ bytes: [UInt8]) {
        switch consume self {
        case .json(var parser):
            parser.append(bytes)
            self = .json(parser)
        case .messagePack(var parser):
            parser.append(bytes)
            self = .messagePack(parser)
        }
    }

    /// The message out of `result`, moved (`Result.get()` copies it, then destroys the result).
    @inlinable
    static func moved(
        _ result: consuming Result<HubMessage?, HubProtocolError>
    ) throws(HubProtocolError) -> HubMessage? {
        switch consume result {
        case .success(let message): message
        case .failure(let error): throw error
        }
    }

    public mutating func next() throws(HubProtocolError) -> HubMessage? {
        let result: Result<HubMessage?, HubProtocolError>
        switch consume self {
        case .json(var parser):
            do throws(HubProtocolError) {
                result = .success(try parser.next())
            } catch {
                result = .failure(error)
            }
            self = .json(parser)
        case .messagePack(var parser):
            do throws(HubProtocolError) {
                result = .success(try parser.next())
            } catch {
                result = .failure(error)
            }
            self = .messagePack(parser)
        }
        return try Self.moved(result)
    }

    @inlinable
    public mutating func next<Binder: HubMessageBinder>(
        binding binder: inout Binder
    ) throws(HubProtocolError) -> HubMessage? {
        let result: Result<HubMessage?, HubProtocolError>
        switch consume self {
        case .json(var parser):
            do throws(HubProtocolError) {
                result = .success(try parser.next(binding: &binder))
            } catch {
                result = .failure(error)
            }
            self = .json(parser)
        case .messagePack(var parser):
            do throws(HubProtocolError) {
                result = .success(try parser.next(binding: &binder))
            } catch {
                result = .failure(error)
            }
            self = .messagePack(parser)
        }
        return try Self.moved(result)
    }

    public var hasPartialMessage: Bool {
        switch self {
        case .json(let parser): parser.hasPartialMessage
        case .messagePack(let parser): parser.hasPartialMessage
        }
    }
}
