import TetherCore
@_spi(TetherInternal) import TetherText

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

    /// Ends every container at `level` or deeper, innermost first. (Every member and element
    /// asks; mostly nothing is open that deep, and that check is inline.)
    @inline(__always)
    mutating func close(downTo level: Int) {
        if open.count > level { closeContainers(downTo: level) }
    }

    @inline(never)
    mutating func closeContainers(downTo level: Int) {
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

    /// Writes `value` with `append`, or throws `invalidValue` for infinities and NaN (which
    /// JSON cannot represent), as JSONEncoder does by default.
    mutating func writeFinite<F: BinaryFloatingPoint>(_ value: F, _ append: (F, inout [UInt8]) -> Void) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: [], debugDescription: "JSON cannot represent \(value).")
            )
        }
        append(value, &bytes)
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

struct JSONValueEncoder: Encoder, IntegerValueEncoding {
    let sink: JSONEncodingSink
    let level: Int

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let offset = sink.state.open.keyedOffset(at: level) ?? sink.state.openContainer(level: level, isObject: true)
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
    func encode(_ value: Double) throws { try sink.state.writeFinite(value) { JSONText.appendDouble($0, to: &$1) } }
    func encode(_ value: Float) throws { try sink.state.writeFinite(value) { JSONText.appendFloat($0, to: &$1) } }
    func encodeInteger<T: FixedWidthInteger>(_ value: T) {
        if T.isSigned {
            JSONText.appendInteger(Int64(value), to: &sink.state.bytes)
        } else {
            JSONText.appendInteger(UInt64(value), to: &sink.state.bytes)
        }
    }
    func encode<T: Encodable>(_ value: T) throws { try sink.encodeValue(value, level: level) }
}

struct JSONKeyedEncodingContainer<Key: CodingKey>: EntryKeyedEncoding {
    let sink: JSONEncodingSink
    let level: Int
    let openOffset: Int

    func entry(_ key: Key) -> JSONValueEncoder {
        let name = key.stringValue  // the (app-defined) key first: no call out during the access
        sink.state.beginMember(level: level, openOffset: openOffset, key: name)
        return JSONValueEncoder(sink: sink, level: level + 1)
    }

    mutating func superEncoder() -> any Encoder {
        sink.state.beginMember(level: level, openOffset: openOffset, key: "super")
        return JSONValueEncoder(sink: sink, level: level + 1)
    }
}

struct JSONUnkeyedEncodingContainer: ElementUnkeyedEncoding {
    let sink: JSONEncodingSink
    let level: Int
    let openOffset: Int

    var count: Int { sink.state.open.elementCount(at: level, offset: openOffset) }

    func element() -> JSONValueEncoder {
        sink.state.beginElement(level: level, openOffset: openOffset)
        return JSONValueEncoder(sink: sink, level: level + 1)
    }
}
