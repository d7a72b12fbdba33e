import TetherCore
public import TetherText

/// A type that writes itself straight to JSON with a `JSONWriter`, for hot paths where `Codable`
/// is too slow: the counterpart of `JSONDecodable`.
///
/// `EncodedValue(_:encoding:)` and `EncodedArguments(encoding:_:)` write a conforming type's JSON
/// with `encode(json:)` and its MessagePack with `encode(to:)` (or with `encode(messagePack:)` if
/// it is `MessagePackEncodable` too). The choice is made at compile time, by overload.
///
/// ```swift
/// extension ChatMessage: JSONEncodable {
///     func encode(json writer: inout JSONWriter) throws {
///         writer.writeObjectStart()
///         writer.writeKey(0, of: Self.keys)
///         writer.writeInt(Int64(id))
///         writer.writeKey(1, of: Self.keys)
///         writer.writeString(text)
///         writer.writeObjectEnd()
///     }
/// }
/// ```
public protocol JSONEncodable: Encodable {
    /// Writes this value as exactly one JSON value.
    func encode(json writer: inout JSONWriter) throws
}

/// Writes one compact JSON value, for `JSONEncodable` conformances: commas are placed by the
/// writer, keys come pre-escaped from a `KeySet`, strings are escaped as the `Codable` path
/// escapes them.
///
/// The writer checks the structure as it goes (a key only where an object expects one, a value
/// only where one may stand, containers closed in order) and traps on a misuse, like an out-of-range array index: a conformance cannot put invalid JSON on the wire.
public struct JSONWriter {
    /// The bytes written so far.
    public internal(set) var bytes: [UInt8]
    /// One bit per open container of the innermost 64 (or fewer), innermost lowest: 1 for an
    /// object, 0 for an array.
    var objects: UInt64 = 0
    /// The bit words of the containers outside those (empty, so unallocated, for values up to
    /// 64 levels deep).
    var outerObjects: [UInt64] = []
    /// The number of open containers.
    var depth = 0
    /// Whether the innermost container has an element (so the next one needs a comma).
    var hasElement = false
    /// Whether a key was just written (so a value must follow).
    var afterKey = false
    /// Whether a complete top-level value has been written.
    var isComplete = false

    /// An empty writer (for writing JSON outside a hub message, or testing a conformance).
    public init() {
        self.bytes = []
    }

    var inObject: Bool { depth > 0 && objects & 1 == 1 }

    /// Prepares for a value: the comma before an array element, the checks.
    @inline(__always)
    mutating func beginValue() {
        if inObject {
            precondition(afterKey, "JSONWriter: a value in an object needs a key first")
            afterKey = false
        } else if depth > 0 {
            if hasElement { bytes.append(UInt8(ascii: ",")) }
        } else {
            precondition(!isComplete, "JSONWriter: more than one top-level value")
        }
    }

    /// Records a complete value.
    @inline(__always)
    mutating func endValue() {
        if depth > 0 { hasElement = true } else { isComplete = true }
    }

    /// Starts an object (then keys and values, then `writeObjectEnd`).
    public mutating func writeObjectStart() {
        open(object: true, UInt8(ascii: "{"))
    }

    /// Ends the innermost object.
    public mutating func writeObjectEnd() {
        precondition(inObject && !afterKey, "JSONWriter: no object to end here")
        close(UInt8(ascii: "}"))
    }

    /// Starts an array (then values, then `writeArrayEnd`).
    public mutating func writeArrayStart() {
        open(object: false, UInt8(ascii: "["))
    }

    /// Ends the innermost array.
    public mutating func writeArrayEnd() {
        precondition(depth > 0 && !inObject, "JSONWriter: no array to end here")
        close(UInt8(ascii: "]"))
    }

    mutating func open(object: Bool, _ bracket: UInt8) {
        beginValue()
        bytes.append(bracket)
        if depth > 0 && depth % 64 == 0 {
            outerObjects.append(objects)
            objects = 0
        }
        objects = objects << 1 | (object ? 1 : 0)
        depth += 1
        hasElement = false
    }

    mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        objects >>= 1
        depth -= 1
        if depth > 0 && depth % 64 == 0 { objects = outerObjects.removeLast() }
        endValue()
    }

    /// Writes the key at `index` of `keys` (pre-escaped) and its colon.
    public mutating func writeKey(_ index: Int, of keys: KeySet) {
        beginKey()
        keys.appendJSONMemberName(index, to: &bytes)
    }

    /// Writes the key `name` and its colon.
    public mutating func writeKey(_ name: String) {
        beginKey()
        JSONText.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    @inline(__always)
    mutating func beginKey() {
        precondition(inObject && !afterKey, "JSONWriter: a key outside an object, or two keys in a row")
        if hasElement { bytes.append(UInt8(ascii: ",")) }
        hasElement = true
        afterKey = true
    }

    /// Writes a string.
    public mutating func writeString(_ value: String) {
        beginValue()
        JSONText.appendString(value, to: &bytes)
        endValue()
    }

    /// Writes an integer.
    public mutating func writeInt(_ value: Int64) {
        beginValue()
        JSONText.appendInteger(value, to: &bytes)
        endValue()
    }

    /// Writes a non-negative integer.
    public mutating func writeUInt(_ value: UInt64) {
        beginValue()
        JSONText.appendInteger(value, to: &bytes)
        endValue()
    }

    /// Writes a number; JSON has no NaN or infinities, so those are an
    /// `EncodingError.invalidValue`, as for `Codable`.
    public mutating func writeDouble(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                .init(codingPath: [], debugDescription: "JSON cannot represent \(value).")
            )
        }
        beginValue()
        JSONText.appendDouble(value, to: &bytes)
        endValue()
    }

    /// Writes `true` or `false`.
    public mutating func writeBool(_ value: Bool) {
        beginValue()
        bytes.append(contentsOf: value ? [0x74, 0x72, 0x75, 0x65] : [0x66, 0x61, 0x6c, 0x73, 0x65])
        endValue()
    }

    /// Writes `null`.
    public mutating func writeNull() {
        beginValue()
        bytes.append(contentsOf: [0x6e, 0x75, 0x6c, 0x6c])
        endValue()
    }

    /// Appends `value`'s JSON, written by its `encode(json:)`, to `bytes`. Precondition: it writes
    /// exactly one complete value.
    package static func encode(_ value: some JSONEncodable, into bytes: inout [UInt8]) throws {
        var writer = JSONWriter()
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        try value.encode(json: &writer)
        precondition(writer.isComplete, "JSONWriter: \(type(of: value)).encode(json:) did not write one complete value")
    }
}
