import TetherCore
import TetherText

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
    mutating func close(downTo level: Int) {
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

struct MessagePackValueEncoder: Encoder, SingleValueEncodingContainer {
    let sink: MessagePackEncodingSink
    let level: Int

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if sink.state.open.count == level + 1, sink.state.open[level].isKeyed {
            return KeyedEncodingContainer(
                MessagePackKeyedEncodingContainer(sink: sink, level: level, headerOffset: sink.state.open[level].offset)
            )
        }
        let offset = sink.state.openContainer(level: level, isMap: true)
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
    func encode(_ value: Int) { sink.state.writer.writeInt(Int64(value)) }
    func encode(_ value: Int8) { sink.state.writer.writeInt(Int64(value)) }
    func encode(_ value: Int16) { sink.state.writer.writeInt(Int64(value)) }
    func encode(_ value: Int32) { sink.state.writer.writeInt(Int64(value)) }
    func encode(_ value: Int64) { sink.state.writer.writeInt(value) }
    func encode(_ value: UInt) { sink.state.writer.writeUInt(UInt64(value)) }
    func encode(_ value: UInt8) { sink.state.writer.writeUInt(UInt64(value)) }
    func encode(_ value: UInt16) { sink.state.writer.writeUInt(UInt64(value)) }
    func encode(_ value: UInt32) { sink.state.writer.writeUInt(UInt64(value)) }
    func encode(_ value: UInt64) { sink.state.writer.writeUInt(value) }
    func encode<T: Encodable>(_ value: T) throws { try sink.encodeValue(value, level: level) }
}

struct MessagePackKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let sink: MessagePackEncodingSink
    let level: Int
    let headerOffset: Int

    var codingPath: [any CodingKey] { [] }

    /// Starts the entry for `key` and returns the writer-level encoder for its value.
    func entry(_ key: Key) -> MessagePackValueEncoder {
        // The key's (app-defined) values first: no call out while the state is being accessed.
        let integerKey = key.intValue
        let stringKey = key.stringValue
        sink.state.beginEntry(level: level, headerOffset: headerOffset, integerKey: integerKey, stringKey: stringKey)
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }

    mutating func encodeNil(forKey key: Key) { entry(key).encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: String, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Int, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Int8, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Int16, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Int32, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Int64, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: UInt, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) { entry(key).encode(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try entry(key).encode(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type,
        forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        entry(key).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        entry(key).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        sink.state.beginElement(level: level, headerOffset: headerOffset)
        sink.state.writer.writeString("super")
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder { entry(key) }
}

struct MessagePackUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let sink: MessagePackEncodingSink
    let level: Int
    let headerOffset: Int

    var codingPath: [any CodingKey] { [] }
    var count: Int {
        sink.state.open.count > level && sink.state.open[level].offset == headerOffset
            ? sink.state.open[level].count : 0
    }

    func element() -> MessagePackValueEncoder {
        sink.state.beginElement(level: level, headerOffset: headerOffset)
        return MessagePackValueEncoder(sink: sink, level: level + 1)
    }

    mutating func encodeNil() { element().encodeNil() }
    mutating func encode(_ value: Bool) { element().encode(value) }
    mutating func encode(_ value: String) { element().encode(value) }
    mutating func encode(_ value: Double) { element().encode(value) }
    mutating func encode(_ value: Float) { element().encode(value) }
    mutating func encode(_ value: Int) { element().encode(value) }
    mutating func encode(_ value: Int8) { element().encode(value) }
    mutating func encode(_ value: Int16) { element().encode(value) }
    mutating func encode(_ value: Int32) { element().encode(value) }
    mutating func encode(_ value: Int64) { element().encode(value) }
    mutating func encode(_ value: UInt) { element().encode(value) }
    mutating func encode(_ value: UInt8) { element().encode(value) }
    mutating func encode(_ value: UInt16) { element().encode(value) }
    mutating func encode(_ value: UInt32) { element().encode(value) }
    mutating func encode(_ value: UInt64) { element().encode(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try element().encode(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        element().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        element().unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { element() }
}
