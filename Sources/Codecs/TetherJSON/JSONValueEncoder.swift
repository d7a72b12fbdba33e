import TetherCore
import TetherText

/// Encodes `Encodable` values as compact JSON, streaming straight into the output bytes (no
/// intermediate tree). Non-finite floating-point values are an `EncodingError.invalidValue`, as
/// with Foundation's `JSONEncoder`.
///
/// Containers must be used in the usual nested order: once a sibling value has been encoded
/// after a nested container, writing to that nested container again is a programming error.
package enum JSONValueEncoding {
    /// Appends the JSON encoding of `value` to `bytes`.
    package static func encode(_ value: some Encodable, into bytes: inout [UInt8]) throws {
        let sink = JSONEncodingSink.make()
        swap(&sink.state.bytes, &bytes)
        defer { swap(&sink.state.bytes, &bytes) }
        try sink.encodeValue(value, level: 0)
    }
}

/// The output of one `encode` call and the stack of containers still open in it: a value type in
/// the sink's header, so that each step is one mutating call on it.
struct JSONEncodingState {
    var bytes: [UInt8] = []
    var open = EncodingContainerStack()

    mutating func close(downTo level: Int) {
        while open.count > level {
            bytes.append(open.removeLast().isKeyed ? UInt8(ascii: "}") : UInt8(ascii: "]"))
        }
    }

    mutating func openContainer(level: Int, isObject: Bool) -> Int {
        close(downTo: level)
        let offset = bytes.count
        bytes.append(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
        open.append(EncodingContainerStack.Entry(offset: offset, count: 0, isKeyed: isObject))
        return offset
    }

    mutating func beginElement(level: Int, openOffset: Int) {
        close(downTo: level + 1)
        if open.addElement(level: level, offset: openOffset) > 0 { bytes.append(UInt8(ascii: ",")) }
    }

    /// Starts an object member: a separator if needed, then `"key":`.
    mutating func beginMember(level: Int, openOffset: Int, key: String) {
        beginElement(level: level, openOffset: openOffset)
        JSONText.appendString(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func writeDouble(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: [], debugDescription: "JSON cannot represent \(value).")
            )
        }
        JSONText.appendDouble(value, to: &bytes)
    }

    mutating func writeFloat(_ value: Float) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: [], debugDescription: "JSON cannot represent \(value).")
            )
        }
        JSONText.appendFloat(value, to: &bytes)
    }
}

/// The shared output of one `encode` call, referenced by all its encoder and container values.
///
/// As `MessagePackEncodingSink`: the state is this `ManagedBuffer`'s header, reached through
/// addressors so that the many small accesses to it are not checked for exclusivity at run time;
/// no access lasts across a call into the value being encoded.
@safe final class JSONEncodingSink: ManagedBuffer<JSONEncodingState, UInt8> {
    static func make() -> JSONEncodingSink {
        unsafe unsafeDowncast(create(minimumCapacity: 0) { _ in JSONEncodingState() }, to: JSONEncodingSink.self)
    }

    var state: JSONEncodingState {
        unsafeAddress { unsafe withUnsafeMutablePointerToHeader { unsafe UnsafePointer($0) } }
        unsafeMutableAddress { unsafe withUnsafeMutablePointerToHeader { unsafe $0 } }
    }

    func encodeValue<T: Encodable>(_ value: T, level: Int) throws {
        let before = state.bytes.count
        try value.encode(to: JSONValueEncoder(sink: self, level: level))
        state.close(downTo: level)
        if state.bytes.count == before {
            state.bytes.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")])  // as JSONEncoder does
        }
    }
}

struct JSONValueEncoder: Encoder, SingleValueEncodingContainer {
    let sink: JSONEncodingSink
    let level: Int

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if sink.state.open.count == level + 1, sink.state.open[level].isKeyed {
            return KeyedEncodingContainer(
                JSONKeyedEncodingContainer(sink: sink, level: level, openOffset: sink.state.open[level].offset)
            )
        }
        let offset = sink.state.openContainer(level: level, isObject: true)
        return KeyedEncodingContainer(JSONKeyedEncodingContainer(sink: sink, level: level, openOffset: offset))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let offset = sink.state.openContainer(level: level, isObject: false)
        return JSONUnkeyedEncodingContainer(sink: sink, level: level, openOffset: offset)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() { sink.state.bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
    func encode(_ value: Bool) {
        if value {
            sink.state.bytes.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        } else {
            sink.state.bytes.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        }
    }
    func encode(_ value: String) { JSONText.appendString(value, to: &sink.state.bytes) }
    func encode(_ value: Double) throws { try sink.state.writeDouble(value) }
    func encode(_ value: Float) throws { try sink.state.writeFloat(value) }
    func encode(_ value: Int) { JSONText.appendInteger(Int64(value), to: &sink.state.bytes) }
    func encode(_ value: Int8) { JSONText.appendInteger(Int64(value), to: &sink.state.bytes) }
    func encode(_ value: Int16) { JSONText.appendInteger(Int64(value), to: &sink.state.bytes) }
    func encode(_ value: Int32) { JSONText.appendInteger(Int64(value), to: &sink.state.bytes) }
    func encode(_ value: Int64) { JSONText.appendInteger(value, to: &sink.state.bytes) }
    func encode(_ value: UInt) { JSONText.appendInteger(UInt64(value), to: &sink.state.bytes) }
    func encode(_ value: UInt8) { JSONText.appendInteger(UInt64(value), to: &sink.state.bytes) }
    func encode(_ value: UInt16) { JSONText.appendInteger(UInt64(value), to: &sink.state.bytes) }
    func encode(_ value: UInt32) { JSONText.appendInteger(UInt64(value), to: &sink.state.bytes) }
    func encode(_ value: UInt64) { JSONText.appendInteger(value, to: &sink.state.bytes) }
    func encode<T: Encodable>(_ value: T) throws { try sink.encodeValue(value, level: level) }
}

struct JSONKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let sink: JSONEncodingSink
    let level: Int
    let openOffset: Int

    var codingPath: [any CodingKey] { [] }

    func entry(_ key: Key) -> JSONValueEncoder {
        let name = key.stringValue  // the (app-defined) key first: no call out during the access
        sink.state.beginMember(level: level, openOffset: openOffset, key: name)
        return JSONValueEncoder(sink: sink, level: level + 1)
    }

    mutating func encodeNil(forKey key: Key) { entry(key).encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: String, forKey key: Key) { entry(key).encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try entry(key).encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try entry(key).encode(value) }
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
        sink.state.beginMember(level: level, openOffset: openOffset, key: "super")
        return JSONValueEncoder(sink: sink, level: level + 1)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder { entry(key) }
}

struct JSONUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let sink: JSONEncodingSink
    let level: Int
    let openOffset: Int

    var codingPath: [any CodingKey] { [] }
    var count: Int {
        sink.state.open.count > level && sink.state.open[level].offset == openOffset ? sink.state.open[level].count : 0
    }

    func element() -> JSONValueEncoder {
        sink.state.beginElement(level: level, openOffset: openOffset)
        return JSONValueEncoder(sink: sink, level: level + 1)
    }

    mutating func encodeNil() { element().encodeNil() }
    mutating func encode(_ value: Bool) { element().encode(value) }
    mutating func encode(_ value: String) { element().encode(value) }
    mutating func encode(_ value: Double) throws { try element().encode(value) }
    mutating func encode(_ value: Float) throws { try element().encode(value) }
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
