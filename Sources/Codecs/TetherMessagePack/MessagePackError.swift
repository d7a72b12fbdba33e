/// Why MessagePack input could not be read. Every malformed input maps to one of these; the reader
/// never traps on bytes it is given. Like the other errors of the package: an immutable `kind`
/// and a `message`, with the details the kind has (`offset`, the types of a mismatch, the depth
/// limit).
public struct MessagePackError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The families of failures.
    public enum Kind: Hashable, Sendable {
        /// The input ended inside a value; `offset` is where the missing bytes would start.
        case truncated
        /// The byte `0xc1`, which the format reserves as "never used".
        case reservedByte
        /// A value of another family than the caller asked for (`expected`, `found`).
        case typeMismatch
        /// An integer that does not fit the requested Swift type.
        case integerOutOfRange
        /// A str value whose bytes are not valid UTF-8.
        case invalidUTF8
        /// Arrays and maps nested deeper than the configured limit (`limit`).
        case depthLimitExceeded
        /// A timestamp extension (type -1) of a length other than 4, 8 or 12, or with
        /// nanoseconds ≥ 10⁹.
        case invalidTimestamp
    }

    /// The family.
    public let kind: Kind
    /// Where in the input (nil for `depthLimitExceeded`).
    public let offset: Int?
    /// For `typeMismatch`: the family asked for and the one found.
    public let expected: MessagePackType?
    /// The type found where another was expected (nil when the input ended first).
    public let found: MessagePackType?
    /// For `depthLimitExceeded`: the limit.
    public let limit: Int?

    init(_ kind: Kind, offset: Int?, expected: MessagePackType? = nil, found: MessagePackType? = nil, limit: Int? = nil)
    {
        self.kind = kind
        self.offset = offset
        self.expected = expected
        self.found = found
        self.limit = limit
    }

    /// The input ended inside a value.
    public static func truncated(offset: Int) -> MessagePackError { MessagePackError(.truncated, offset: offset) }
    /// The reserved byte `0xc1`.
    public static func reservedByte(offset: Int) -> MessagePackError { MessagePackError(.reservedByte, offset: offset) }
    /// A value of another family than asked for.
    public static func typeMismatch(expected: MessagePackType, found: MessagePackType, offset: Int) -> MessagePackError
    {
        MessagePackError(.typeMismatch, offset: offset, expected: expected, found: found)
    }
    /// An integer that does not fit.
    public static func integerOutOfRange(offset: Int) -> MessagePackError {
        MessagePackError(.integerOutOfRange, offset: offset)
    }
    /// A str value that is not UTF-8.
    public static func invalidUTF8(offset: Int) -> MessagePackError { MessagePackError(.invalidUTF8, offset: offset) }
    /// Nesting beyond `limit`.
    public static func depthLimitExceeded(limit: Int) -> MessagePackError {
        MessagePackError(.depthLimitExceeded, offset: nil, limit: limit)
    }
    /// An invalid timestamp extension.
    public static func invalidTimestamp(offset: Int) -> MessagePackError {
        MessagePackError(.invalidTimestamp, offset: offset)
    }

    /// The same error with its offset counted from `start` instead: for an error inside a value
    /// that a larger buffer holds at `start`, so that its text does not depend on what else the
    /// buffer held.
    public func offset(from start: Int) -> MessagePackError {
        MessagePackError(kind, offset: offset.map { $0 - start }, expected: expected, found: found, limit: limit)
    }

    /// The text.
    public var message: String {
        let at = offset.map { " (offset \($0))" } ?? ""
        return switch kind {
        case .truncated: "MessagePack input ends inside a value\(at)."
        case .reservedByte: "MessagePack input contains the reserved byte 0xc1\(at)."
        case .typeMismatch:
            "Expected a MessagePack \(expected.map { "\($0)" } ?? "value") but found \(found.map { "\($0)" } ?? "another")\(at)."
        case .integerOutOfRange: "MessagePack integer out of range\(at)."
        case .invalidUTF8: "MessagePack string is not valid UTF-8\(at)."
        case .depthLimitExceeded: "MessagePack nesting deeper than \(limit ?? 0) levels."
        case .invalidTimestamp: "Invalid MessagePack timestamp\(at)."
        }
    }

    public var description: String { message }
}

/// The families of MessagePack values, independent of their wire width.
public enum MessagePackType: Hashable, Sendable, CustomStringConvertible {
    /// nil.
    case `nil`
    /// A boolean.
    case bool
    /// An integer of any width, signed or not.
    case integer
    /// A 32- or 64-bit float.
    case float
    /// A UTF-8 string.
    case string
    /// Binary data.
    case binary
    /// An array.
    case array
    /// A map.
    case map
    /// An extension value (type and bytes).
    case `extension`

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
