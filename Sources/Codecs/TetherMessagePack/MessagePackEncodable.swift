import TetherCore
public import TetherText

/// A type that writes itself straight to MessagePack with a `MessagePackWriter`, for hot paths
/// where `Codable` is too slow: the counterpart of `MessagePackDecodable`.
///
/// `MessagePackEncoder.encode(_:)`, `EncodedValue(_:encoding:)` and
/// `EncodedArguments(encoding:_:)` write a conforming type's MessagePack with
/// `encode(messagePack:)` and its JSON (and everything else) with `encode(to:)`. The choice is
/// made at compile time, by overload: in code that is generic over `T: Encodable` the `Codable`
/// path is used. Write map keys with `writeKey(_:of:)`, which appends their pre-encoded bytes:
///
/// ```swift
/// extension ChatMessage: MessagePackEncodable {
///     func encode(messagePack writer: inout MessagePackWriter) {
///         writer.writeMapHeader(count: 2)
///         writer.writeKey(0, of: Self.keys)
///         writer.writeInt(Int64(id))
///         writer.writeKey(1, of: Self.keys)
///         writer.writeString(text)
///     }
/// }
/// ```
public protocol MessagePackEncodable: Encodable {
    /// Writes this value as exactly one MessagePack value.
    func encode(messagePack writer: inout MessagePackWriter) throws
}

extension MessagePackWriter {
    /// Writes the key at `index` of `keys` as a str value. Precondition: `index < keys.count`.
    public mutating func writeKey(_ index: Int, of keys: KeySet) {
        keys.appendMessagePackKey(index, to: &bytes)
    }
}

extension MessagePackEncoder {
    /// Encodes `value` with `encode(messagePack:)`.
    public func encode(_ value: some MessagePackEncodable) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try encode(value, into: &bytes)
        return bytes
    }

    /// Appends the MessagePack encoding of `value`, written with `encode(messagePack:)`, to `bytes`.
    public func encode(_ value: some MessagePackEncodable, into bytes: inout [UInt8]) throws {
        var writer = MessagePackWriter()
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        try value.encode(messagePack: &writer)
    }
}
