@_spi(TetherInternal) public import TetherCore
@_spi(TetherInternal) import TetherText

/// The `json` hub protocol: each message is one JSON object followed by the record separator
/// 0x1E (HubProtocol.md "JSON Encoding").
///
/// Decoding follows ASP.NET Core's `JsonHubProtocol`: property order is free, unknown properties
/// and unknown message types are ignored, whitespace is allowed, and invalid input fails with the
/// same texts (for example "Missing required property 'arguments'."). Encoding writes the
/// canonical compact form in the C# property order.
public struct JSONHubProtocol: HubProtocol {
    /// The record separator that ends every JSON record.
    public static let recordSeparator: UInt8 = 0x1E

    /// The largest message accepted, in bytes (default 1 MiB); larger ones are an error.
    public var maximumMessageSize: Int
    /// The deepest nesting of arrays and objects accepted inside a message (default 64).
    public var maximumDepth: Int

    /// Creates the protocol with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var name: String { "json" }
    public var version: Int { 2 }
    public var transferFormat: TransferFormat { .text }
    public var valueEncoding: ValueEncoding { .json }

    public func makeParser() -> JSONHubMessageParser {
        JSONHubMessageParser(maximumMessageSize: maximumMessageSize, maximumDepth: maximumDepth)
    }

    public func write(_ message: HubMessage, into bytes: inout [UInt8]) {
        JSONHubMessageWriter.write(message, into: &bytes, payloads: JSONHubMessageWriter.verbatim)
        bytes.append(Self.recordSeparator)
    }
}

/// Incremental decoder of the JSON hub protocol: splits the stream at 0x1E (scanning each byte
/// once) and parses each record.
public struct JSONHubMessageParser: HubMessageParser {
    var buffer = ReceiveBuffer()
    /// How far past `buffer.start` the search for the separator has already looked.
    var scanned = 0
    var failure: HubProtocolError?
    var targets = StringInterner(capacity: 64)
    let maximumMessageSize: Int
    let maximumDepth: Int

    /// A parser with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var hasPartialMessage: Bool { buffer.pendingCount > 0 }

    public mutating func append(_ bytes: Span<UInt8>) {
        guard failure == nil else { return }
        // (`scanned` counts from `buffer.start`: the pending bytes stay first, wherever they are.)
        buffer.append(bytes)
    }

    /// Adds a received array, kept itself rather than copied unless an unfinished record is
    /// pending; then only its bytes up to the record's separator are copied.
    public mutating func append(_ bytes: [UInt8]) {
        guard failure == nil else { return }
        // Up to the array's first separator, the pending bytes and the array's first ones are
        // whole records (the pending bytes may already hold some, appended without a `next()`).
        buffer.append(bytes) { _, received in
            ByteScanning.firstIndex(
                of: JSONHubProtocol.recordSeparator,
                in: received,
                from: 0,
                to: received.count
            ).map { $0 + 1 }
        }
    }

    public mutating func next() throws(HubProtocolError) -> HubMessage? {
        try next(binds: false) { _, _ in }
    }

    /// The next complete message, its payload offered to `binder` once the record is read and
    /// validated (see `HubMessageBinder`).
    @inlinable
    public mutating func next<Binder: HubMessageBinder>(
        binding binder: inout Binder
    ) throws(HubProtocolError) -> HubMessage? {
        try next(binds: true) { binder.offer($0, &$1) }
    }

    /// `next()`, offering each payload to `offer` when `binds`.
    @usableFromInline
    mutating func next(
        binds: Bool,
        offering offer: (HubPayloadOwner, inout HubPayloadReader) -> Void
    ) throws(HubProtocolError) -> HubMessage? {
        if let failure { throw failure }
        while true {
            if buffer.advance() { scanned = 0 }
            // A record met for the first time is parsed at once, up to its separator; only if
            // that fails (the record is not all here yet, or it is invalid) is the separator
            // searched for first. This spares a search over every record.
            if scanned == 0 && buffer.pendingCount > 0 {
                let start = buffer.start
                if let (message, separator) = JSONHubRecord.parseComplete(
                    buffer.storage,
                    from: start,
                    maximumDepth: maximumDepth,
                    targets: &targets,
                    maximumMessageSize: maximumMessageSize,
                    binds: binds,
                    offer: offer
                ) {
                    guard separator - start <= maximumMessageSize else { throw fail(.tooLarge(maximumMessageSize)) }
                    buffer.start = separator + 1
                    if let message { return message }
                    continue
                }
            }
            guard let end = findSeparator() else {
                if buffer.pendingCount > maximumMessageSize { throw fail(.tooLarge(maximumMessageSize)) }
                return nil
            }
            let record = buffer.start..<end
            buffer.start = end + 1
            scanned = 0
            guard record.count <= maximumMessageSize else { throw fail(.tooLarge(maximumMessageSize)) }
            do {
                if let message = try JSONHubRecord.parse(
                    buffer.storage,
                    record,
                    maximumDepth: maximumDepth,
                    targets: &targets,
                    binds: binds,
                    offer: offer
                ) {
                    return message
                }
            } catch {
                throw fail(error)
            }
        }
    }

    private mutating func fail(_ error: HubProtocolError) -> HubProtocolError {
        failure = error
        buffer = ReceiveBuffer()
        return error
    }

    /// The offset of the next 0x1E, continuing where the last search stopped.
    private mutating func findSeparator() -> Int? {
        let storage = buffer.storage
        let end = storage.count
        if let index = ByteScanning.firstIndex(
            of: JSONHubProtocol.recordSeparator,
            in: storage.backDeployedSpan,
            from: buffer.start + scanned,
            to: end
        ) {
            return index
        }
        scanned = end - buffer.start
        return nil
    }
}

extension HubProtocolError {
    static func tooLarge(_ limit: Int) -> HubProtocolError {
        HubProtocolError(.messageTooLarge, "The maximum message size of \(limit)B was exceeded.")
    }
}
