import TetherCore
@_spi(TetherInternal) import TetherText

/// Encodes `Encodable` values as MessagePack, streaming straight into the output bytes.
///
/// Keyed containers become maps with string keys (integer keys for `CodingKey`s that have an
/// `intValue` and `useIntegerKeys` set), unkeyed containers arrays; `[UInt8]` becomes a bin value
/// and `MessagePackTimestamp` the timestamp extension. Every value uses its shortest encoding:
/// a container's header is written once its element count is known.
///
/// Containers must be used in the usual nested order: once a sibling value has been encoded
/// after a nested container, writing to that nested container again is a programming error.
public struct MessagePackEncoder: Sendable {
    /// Whether keys with an `intValue` are written as integers instead of strings (default false).
    public var useIntegerKeys: Bool

    /// Creates an encoder.
    public init(useIntegerKeys: Bool = false) {
        self.useIntegerKeys = useIntegerKeys
    }

    /// The MessagePack encoding of `value`.
    public func encode(_ value: some Encodable) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try encode(value, into: &bytes)
        return bytes
    }

    /// Appends the MessagePack encoding of `value` to `bytes`.
    public func encode(_ value: some Encodable, into bytes: inout [UInt8]) throws {
        let sink = MessagePackEncodingSink.make(useIntegerKeys: useIntegerKeys)
        swap(&sink.state.writer.bytes, &bytes)
        defer { swap(&sink.state.writer.bytes, &bytes) }
        try sink.encodeValue(value, level: 0)
    }
}

/// The output of one `encode` call and the stack of containers still open in it.
///
/// A value type in the sink's header, so that each step (an entry's key, a value) is one
/// mutating call on it.
struct MessagePackEncodingState {
    var writer = MessagePackWriter()
    var open = EncodingContainerStack()
    let useIntegerKeys: Bool

    /// Finishes every container at `level` or deeper, innermost first, writing their headers.
    /// (Every entry and element asks; mostly nothing is open that deep, and that check is inline.)
    @inline(__always)
    mutating func close(downTo level: Int) {
        if open.count > level { closeContainers(downTo: level) }
    }

    @inline(never)
    mutating func closeContainers(downTo level: Int) {
        while open.count > level {
            let container = open.removeLast()
            let offset = container.offset
            let count = container.count
            if count < 16 {
                writer.bytes[offset] = (container.isKeyed ? 0x80 : 0x90) | UInt8(count)
                continue
            }
            // A 16- or 32-bit count: widen the one-byte placeholder in place.
            let width = count <= Int(UInt16.max) ? 2 : 4
            writer.bytes.insert(contentsOf: repeatElement(0, count: width), at: offset + 1)
            writer.bytes[offset] = (container.isKeyed ? 0xde : 0xdc) + (width == 2 ? 0 : 1)
            for index in 0..<width {
                writer.bytes[offset + 1 + index] = UInt8(truncatingIfNeeded: count >> (8 * (width - 1 - index)))
            }
        }
    }

    /// Opens a container at `level` (closing anything deeper) and returns its header offset.
    mutating func openContainer(level: Int, isMap: Bool) -> Int {
        close(downTo: level)
        let offset = writer.bytes.count
        writer.bytes.append(isMap ? 0x80 : 0x90)
        open.append(EncodingContainerStack.Entry(offset: offset, count: 0, isKeyed: isMap))
        return offset
    }

    /// Prepares the container at `level` (identified by `headerOffset`) for one more element.
    mutating func beginElement(level: Int, headerOffset: Int) {
        close(downTo: level + 1)
        _ = open.addElement(level: level, offset: headerOffset)
    }

    /// Starts a map entry: one more element for the map at `level`, then its key (the integer
    /// key when the encoder uses them and the key has one). Not generic over the key type: in a
    /// generic context each access to the container stack copied the whole state.
    @inline(never)
    mutating func beginEntry(level: Int, headerOffset: Int, integerKey: Int?, stringKey: String) {
        beginElement(level: level, headerOffset: headerOffset)
        if useIntegerKeys, let integerKey {
            writer.writeInt(Int64(integerKey))
        } else {
            writer.writeString(stringKey)
        }
    }
}

/// The shared output of one `encode` call, referenced by all its encoder and container values.
///
/// The state is the header of this `ManagedBuffer` (one allocation), reached through addressors,
/// so that the encoder's many small accesses to it are not checked for exclusivity at run time as
/// a class's stored property would be (that was about a sixth of the encoding time). Every access
/// is one statement that never calls out to the value being encoded while it lasts: encoder and
/// container methods touch the state, then return or call `encode(to:)` afterwards, the
/// discipline the run-time checks enforced before.
@safe final class MessagePackEncodingSink: ManagedBuffer<MessagePackEncodingState, UInt8> {
    static func make(useIntegerKeys: Bool) -> MessagePackEncodingSink {
        let buffer = create(minimumCapacity: 0) { _ in MessagePackEncodingState(useIntegerKeys: useIntegerKeys) }
        return unsafe unsafeDowncast(buffer, to: MessagePackEncodingSink.self)
    }

    var state: MessagePackEncodingState {
        unsafeAddress { unsafe withUnsafeMutablePointerToHeader { unsafe UnsafePointer($0) } }
        unsafeMutableAddress { unsafe withUnsafeMutablePointerToHeader { unsafe $0 } }
    }

    /// Encodes a nested value whose containers live at `level`.
    func encodeValue<T: Encodable>(_ value: T, level: Int) throws {
        if T.self == [UInt8].self {
            state.writer.writeBinary(unsafe unsafeBitCast(value, to: [UInt8].self))
            return
        }
        if T.self == MessagePackTimestamp.self {
            state.writer.writeTimestamp(unsafe unsafeBitCast(value, to: MessagePackTimestamp.self))
            return
        }
        let before = state.writer.bytes.count
        try value.encode(to: MessagePackValueEncoder(sink: self, level: level))
        state.close(downTo: level)
        if state.writer.bytes.count == before {
            state.writer.writeMapHeader(count: 0)  // like JSONEncoder's `{}` for a value that encodes nothing
        }
    }
}

struct MessagePackValueEncoder: Encoder, IntegerValueEncoding {
    let sink: MessagePackEncodingSink
    let level: Int

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let offset = sink.state.open.keyedOffset(at: level) ?? sink.state.openContainer(level: level, isMap: true)
        return KeyedEncodingContainer(MessagePackKeyedEncodingContainer(sink: sink, level: level, headerOffset: offset))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let offset = sink.state.openContainer(level: level, isMap: false)
        return MessagePackUnkeyedEncodingContainer(sink: sink, level: level, headerOffset: offset)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() { sink.state.writer.writeNil() }
    func encode(_ value: Bool) { sink.state.writer.writeBool(value) }
    func encode(_ value: String) { sink.state.writer.writeString(value) }
    func encode(_ value: Double) { sink.state.writer.writeDouble(value) }
    func encode(_ value: Float) { sink.state.writer.writeFloat(value) }
    func encodeInteger<T: FixedWidthInteger>(_ value: T) {
        if T.isSigned {
            sink.state.writer.writeInt(Int64(value))
        } else {
            sink.state.writer.writeUInt(UInt64(value))
        }
    }
    func encode<T: Encodable>(_ value: T) throws { try sink.encodeValue(value, level: level) }
}

struct MessagePackKeyedEncodingContainer<Key: CodingKey>: EntryKeyedEncoding {
    let sink: MessagePackEncodingSink
    let level: Int
    let headerOffset: Int

    /// Starts the entry for `key` and returns the writer-level encoder for its value.
    func entry(_ key: Key) -> MessagePackValueEncoder {
        // The key's (app-defined) values first: no call out while the state is being accessed.
        let integerKey = key.intValue
        let stringKey = key.stringValue
        sink.state.beginEntry(level: level, headerOffset: headerOffset, integerKey: integerKey, stringKey: stringKey)
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }

    mutating func superEncoder() -> any Encoder {
        sink.state.beginElement(level: level, headerOffset: headerOffset)
        sink.state.writer.writeString("super")
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }
}

struct MessagePackUnkeyedEncodingContainer: ElementUnkeyedEncoding {
    let sink: MessagePackEncodingSink
    let level: Int
    let headerOffset: Int

    var count: Int { sink.state.open.elementCount(at: level, offset: headerOffset) }

    func element() -> MessagePackValueEncoder {
        sink.state.beginElement(level: level, headerOffset: headerOffset)
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }
}
