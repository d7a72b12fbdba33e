/// Why MessagePack input could not be read. Every malformed input maps to one of these; the reader
/// never traps on bytes it is given.
public enum MessagePackError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The input ended inside a value; `offset` is where the missing bytes would start.
    case truncated(offset: Int)
    /// The byte `0xc1`, which the format reserves as "never used".
    case reservedByte(offset: Int)
    /// A value of another family than the caller asked for.
    case typeMismatch(expected: MessagePackType, found: MessagePackType, offset: Int)
    /// An integer that does not fit the requested Swift type.
    case integerOutOfRange(offset: Int)
    /// A str value whose bytes are not valid UTF-8.
    case invalidUTF8(offset: Int)
    /// Arrays and maps nested deeper than the configured limit.
    case depthLimitExceeded(limit: Int)
    /// A timestamp extension (type -1) of a length other than 4, 8 or 12, or with nanoseconds ≥ 10⁹.
    case invalidTimestamp(offset: Int)

    public var description: String {
        switch self {
        case .truncated(let offset): "MessagePack input ends inside a value (offset \(offset))."
        case .reservedByte(let offset): "MessagePack input contains the reserved byte 0xc1 (offset \(offset))."
        case .typeMismatch(let expected, let found, let offset):
            "Expected a MessagePack \(expected) but found \(found) (offset \(offset))."
        case .integerOutOfRange(let offset): "MessagePack integer out of range (offset \(offset))."
        case .invalidUTF8(let offset): "MessagePack string is not valid UTF-8 (offset \(offset))."
        case .depthLimitExceeded(let limit): "MessagePack nesting deeper than \(limit) levels."
        case .invalidTimestamp(let offset): "Invalid MessagePack timestamp (offset \(offset))."
        }
    }
}

/// The families of MessagePack values, independent of their wire width.
public enum MessagePackType: Hashable, Sendable, CustomStringConvertible {
    case `nil`, bool, integer, float, string, binary, array, map, `extension`

    public var description: String {
        switch self {
        case .nil: "nil"
        case .bool: "bool"
        case .integer: "integer"
        case .float: "float"
        case .string: "string"
        case .binary: "binary"
        case .array: "array"
        case .map: "map"
        case .extension: "extension"
        }
    }
}
