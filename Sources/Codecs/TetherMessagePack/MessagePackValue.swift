/// A MessagePack value as a tree, for tools and tests that need to look at arbitrary data.
///
/// Hot paths do not build these: `MessagePackReader` walks the bytes and `MessagePackDecoder`
/// decodes straight into `Decodable` types.
public enum MessagePackValue: Hashable, Sendable {
    /// nil.
    case `nil`
    /// A boolean.
    case bool(Bool)
    /// A signed integer; negative values always decode to this case.
    case int(Int64)
    /// A non-negative integer (every positive fixint and uint family decodes to this case).
    case uint(UInt64)
    /// A 32-bit float.
    case float(Float)
    /// A 64-bit float.
    case double(Double)
    /// A UTF-8 string.
    case string(String)
    /// Binary data.
    case binary([UInt8])
    /// An array of values.
    case array([MessagePackValue])
    /// Key/value pairs in wire order (keys may be of any type and may repeat).
    case map([MessagePackPair])
    /// An extension value other than the timestamp.
    case `extension`(type: Int8, data: [UInt8])
    /// The timestamp extension (type -1).
    case timestamp(MessagePackTimestamp)
}

/// One entry of a MessagePack map.
public struct MessagePackPair: Hashable, Sendable {
    /// The entry's key.
    public var key: MessagePackValue
    /// The entry's value.
    public var value: MessagePackValue

    /// Creates an entry.
    public init(_ key: MessagePackValue, _ value: MessagePackValue) {
        self.key = key
        self.value = value
    }
}

/// The MessagePack timestamp extension (type -1): seconds since the Unix epoch plus nanoseconds.
///
/// `MessagePackEncoder`/`MessagePackDecoder` map it to the extension; other coders see a keyed
/// value with `seconds` and `nanoseconds`.
public struct MessagePackTimestamp: Hashable, Sendable, Codable {
    /// Whole seconds since 1970-01-01T00:00:00Z (may be negative).
    public var seconds: Int64
    /// Nanoseconds within the second, 0..<1_000_000_000.
    public var nanoseconds: UInt32

    /// Creates a timestamp. Precondition: `nanoseconds < 1_000_000_000`.
    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        precondition(nanoseconds < 1_000_000_000, "nanoseconds must be below 10^9")
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// The extension type code of timestamps.
    public static let extensionType: Int8 = -1
}
