@_spi(TetherInternal) public import TetherCore
import TetherMessagePack
@_spi(TetherInternal) import TetherText

/// The `messagepack` hub protocol: each message is a MessagePack array prefixed by its length as
/// a VarInt of 1–5 bytes (HubProtocol.md "MessagePack (MsgPack) encoding").
///
/// Decoding follows ASP.NET Core's `MessagePackHubProtocolWorker` (same error texts; 5- and
/// 6-element Invocations; 2- and 3-element Close; extra trailing elements ignored) and also
/// accepts the integer that aiosignalr writes in the headers slot (`cc 80`) as empty headers.
/// Encoding writes the C# layout (6-element Invocation, 3-element Close).
public struct MessagePackHubProtocol: HubProtocol {
    /// The largest message accepted, in bytes (default 1 MiB); larger ones are an error.
    public var maximumMessageSize: Int
    /// The deepest nesting of arrays and maps accepted inside a message (default 64).
    public var maximumDepth: Int

    /// Creates the protocol with the given limits.
    public init(
        maximumMessageSize: Int = HubProtocolLimits.defaultMaximumMessageSize,
        maximumDepth: Int = HubProtocolLimits.defaultMaximumDepth
    ) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumDepth = maximumDepth
    }

    public var name: String { "messagepack" }
    public var version: Int { 2 }
    public var transferFormat: TransferFormat { .binary }
    public var valueEncoding: ValueEncoding { .messagePack }

    public func makeParser() -> MessagePackHubMessageParser {
        MessagePackHubMessageParser(maximumMessageSize: maximumMessageSize, maximumDepth: maximumDepth)
    }

    public func write(_ message: HubMessage, into bytes: inout [UInt8]) {
        // Room for a two-byte prefix (messages of 128 B to 16 KiB, the common sizes), adjusted
        // once the length is known: a byte fewer or more moves the message once.
        let prefixOffset = bytes.count
        let reserved = 2
        bytes.append(0)
        bytes.append(0)
        var writer = MessagePackWriter()
        swap(&writer.bytes, &bytes)
        MessagePackHubMessageWriter.write(message, &writer)
        swap(&writer.bytes, &bytes)
        let length = bytes.count - prefixOffset - reserved
        let (prefix, prefixLength) = VarInt.encodePacked(length)
        if prefixLength < reserved {
            bytes.remove(at: prefixOffset + 1)
        } else if prefixLength > reserved {
            bytes.insert(contentsOf: repeatElement(0, count: prefixLength - reserved), at: prefixOffset + reserved)
        }
        for index in 0..<prefixLength { bytes[prefixOffset + index] = UInt8(truncatingIfNeeded: prefix >> (8 * index)) }
    }
}

/// The length prefix of MessagePack hub frames: 7 bits per byte, least significant group first,
/// at most 5 bytes, at most 0x7fffffff. (`package`: the protocol's own detail, shared with the
/// tests and the benchmark.)
package enum VarInt {
    /// The outcome of reading a prefix.
    package enum ReadResult: Equatable, Sendable {
        /// The prefix is complete: the value and how many bytes it took.
        case value(Int, length: Int)
        /// The prefix continues beyond the available bytes.
        case needMoreData
    }

    /// The encoding of `value`, first byte in the low eight bits, and the number of bytes used.
    package static func encodePacked(_ value: Int) -> (bytes: UInt64, count: Int) {
        precondition(value >= 0 && value <= 0x7fff_ffff, "VarInt value out of range")
        var remaining = value
        var packed: UInt64 = 0
        var count = 0
        repeat {
            var byte = UInt64(remaining & 0x7f)
            remaining >>= 7
            if remaining > 0 { byte |= 0x80 }
            packed |= byte << (8 * count)
            count += 1
        } while remaining > 0
        return (packed, count)
    }

    /// The encoding of `value`.
    package static func encode(_ value: Int) -> [UInt8] {
        let (packed, count) = encodePacked(value)
        return (0..<count).map { UInt8(truncatingIfNeeded: packed >> (8 * $0)) }
    }

    /// Reads a prefix at the start of `bytes`, as C#'s `BinaryMessageParser` does.
    package static func read(_ bytes: Span<UInt8>) throws(HubProtocolError) -> ReadResult {
        var value = 0
        var index = 0
        while true {
            guard index < bytes.count else { return .needMoreData }
            let byte = bytes[index]
            if index == 4 && byte > 7 {
                throw HubProtocolError(.messageTooLarge, "Messages over 2GB in size are not supported.")
            }
            value |= Int(byte & 0x7f) << (7 * index)
            index += 1
            if byte & 0x80 == 0 { return .value(value, length: index) }
        }
    }
}

/// Incremental decoder of the MessagePack hub protocol.
public struct MessagePackHubMessageParser: HubMessageParser {
    var buffer = ReceiveBuffer()
    var failure: HubProtocolError?
    var targets = StringInterner(capacity: 64)
    /// A reader over `buffer.storage`, moved from frame to frame (nil after an append).
    var reader: MessagePackReader?
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
        reader = nil
        buffer.append(bytes)
    }

    /// Adds a received array, kept itself rather than copied unless an unfinished message is
    /// pending; then only its bytes up to that message's end are copied.
    public mutating func append(_ bytes: [UInt8]) {
        guard failure == nil else { return }
        reader = nil
        buffer.append(bytes) { pending, received in
            // The pending bytes begin a message whose length prefix is complete, and that ends
            // in the array (not in the pending bytes: they may hold whole messages, appended
            // without a `next()`).
            guard case .value(let length, let prefixLength)? = try? VarInt.read(pending) else { return nil }
            let (end, overflow) = (prefixLength as Int).addingReportingOverflow(Int(length))
            guard !overflow, end > pending.count, end - pending.count <= received.count else { return nil }
            return end - pending.count
        }
    }

    public mutating func next() throws(HubProtocolError) -> HubMessage? {
        try next(binds: false) { _, _ in }
    }

    /// The next complete message, its payload offered to `binder` as it is reached: the values
    /// the binder reads are read once, not skipped first (see `HubMessageBinder`).
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
        while buffer.pendingCount > 0 {
            if buffer.advance() { reader = nil }
            // (`buffer.storage` is used in place, not copied to a local: a copy costs a retain and
            // a release of the shared buffer per message.)
            let prefix: VarInt.ReadResult
            do {
                prefix = try VarInt.read(
                    buffer.storage.backDeployedSpan.extracting(buffer.start..<buffer.storage.count)
                )
            } catch {
                throw fail(error)
            }
            guard case .value(let length, let prefixLength) = prefix else { return nil }
            guard length <= maximumMessageSize else { throw fail(.tooLarge(maximumMessageSize)) }
            let bodyStart = buffer.start + prefixLength
            guard buffer.storage.count - bodyStart >= length else { return nil }
            buffer.start = bodyStart + length
            if reader == nil { reader = MessagePackReader(buffer.storage) }
            reader!.move(to: bodyStart..<(bodyStart + length), maximumDepth: maximumDepth)
            do {
                if let message = try MessagePackHubRecord.parse(
                    &reader!,
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
        return nil
    }

    private mutating func fail(_ error: HubProtocolError) -> HubProtocolError {
        failure = error
        buffer = ReceiveBuffer()
        reader = nil
        return error
    }
}
