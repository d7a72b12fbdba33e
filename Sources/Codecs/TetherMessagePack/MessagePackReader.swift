@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// A cursor that reads MessagePack values from a byte array without copying it.
///
/// The reader covers the whole format (every width of every family, extensions, timestamps). It
/// never traps on malformed input: each read either returns a value and advances, or throws a
/// `MessagePackError` and leaves the cursor where it was. Strings and binaries can be read as
/// ranges of `bytes`, so callers decide what to copy.
public struct MessagePackReader: Sendable {
    /// The default limit on array/map nesting for `skipValue()` and `readValue()`.
    public static let defaultMaximumDepth = 100

    /// The bytes being read (shared, not copied).
    public let bytes: [UInt8]
    /// The offset of the next value in `bytes`.
    public var position: Int
    /// The offset just past the last byte that may be read.
    public package(set) var end: Int
    /// The deepest array/map nesting that `skipValue()` and `readValue()` accept.
    public var maximumDepth: Int
    /// Where `readKey(in:)` starts looking: the index after the last key it matched.
    @usableFromInline var nextKeyHint = 0

    /// A reader over `bytes[range]` (all of `bytes` by default).
    public init(_ bytes: [UInt8], range: Range<Int>? = nil, maximumDepth: Int = Self.defaultMaximumDepth) {
        let range = range ?? 0..<bytes.count
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "range outside the bytes")
        self.bytes = bytes
        self.position = range.lowerBound
        self.end = range.upperBound
        self.maximumDepth = maximumDepth
    }

    /// Moves the reader to `bytes[range]` (another message of the same buffer), as a new reader
    /// there would be, without a new reference to `bytes`.
    package mutating func move(to range: Range<Int>, maximumDepth: Int) {
        precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "range outside the bytes")
        position = range.lowerBound
        end = range.upperBound
        self.maximumDepth = maximumDepth
        nextKeyHint = 0
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { position >= end }

    // MARK: - Peeking

    /// The family of the next value, without consuming it.
    public func peekType() throws(MessagePackError) -> MessagePackType {
        guard position < end else { throw .truncated(offset: position) }
        return try Self.type(of: bytes[position], at: position)
    }

    /// The family that the type byte `byte` starts.
    @inline(__always)
    static func type(of byte: UInt8, at offset: Int) throws(MessagePackError) -> MessagePackType {
        switch byte {
        case 0x00...0x7f, 0xcc...0xd3, 0xe0...0xff: return .integer
        case 0x80...0x8f, 0xde, 0xdf: return .map
        case 0x90...0x9f, 0xdc, 0xdd: return .array
        case 0xa0...0xbf, 0xd9...0xdb: return .string
        case 0xc0: return .nil
        case 0xc1: throw .reservedByte(offset: offset)
        case 0xc2, 0xc3: return .bool
        case 0xc4...0xc6: return .binary
        case 0xc7...0xc9, 0xd4...0xd8: return .extension
        case 0xca, 0xcb: return .float
        default: return .extension  // unreachable: every byte value is covered above
        }
    }

    // MARK: - Big-endian helpers

    @inline(__always)
    func uint(at offset: Int, width: Int) throws(MessagePackError) -> UInt64 {
        try Self.uint(bytes.backDeployedSpan, at: offset, width: width, end: end)
    }

    @inline(__always)
    static func uint(_ span: Span<UInt8>, at offset: Int, width: Int, end: Int) throws(MessagePackError) -> UInt64 {
        guard offset + width <= end else { throw .truncated(offset: offset) }
        if offset >= 0 && offset + 8 <= span.count {
            // One big-endian word load (its bytes past `width` are the next value's, shifted out).
            let word = unsafe span.withUnsafeBytes { unsafe $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
            return UInt64(bigEndian: word) >> UInt64(64 - 8 * width)
        }
        var value: UInt64 = 0
        for index in offset..<(offset + width) {
            value = value << 8 | UInt64(span[index])
        }
        return value
    }

    static func mismatch(
        _ expected: MessagePackType,
        _ byte: UInt8,
        _ offset: Int
    ) throws(MessagePackError) -> MessagePackError {
        .typeMismatch(expected: expected, found: try type(of: byte, at: offset), offset: offset)
    }

    // MARK: - Scalars

    /// Consumes a nil value if one is next; returns whether it did.
    public mutating func readNilIfPresent() -> Bool {
        if position < end, bytes[position] == 0xc0 {
            position += 1
            return true
        }
        return false
    }

    /// Reads a nil value.
    public mutating func readNil() throws(MessagePackError) {
        if !readNilIfPresent() { throw try mismatch(.nil) }
    }

    /// Reads a boolean.
    public mutating func readBool() throws(MessagePackError) -> Bool {
        guard position < end else { throw .truncated(offset: position) }
        switch bytes[position] {
        case 0xc2:
            position += 1
            return false
        case 0xc3:
            position += 1
            return true
        default: throw try mismatch(.bool)
        }
    }

    /// Reads an integer of any width as `Int64` (uint64 values above `Int64.max` are out of range).
    public mutating func readInt64() throws(MessagePackError) -> Int64 {
        let (value, next) = try Self.int64(bytes.backDeployedSpan, position, end)
        position = next
        return value
    }

    /// `readInt64` on a span: the value and the offset after it.
    @usableFromInline
    static func int64(_ span: Span<UInt8>, _ position: Int, _ end: Int) throws(MessagePackError) -> (Int64, Int) {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        switch byte {
        case 0x00...0x7f: return (Int64(byte), position + 1)
        case 0xe0...0xff: return (Int64(Int8(bitPattern: byte)), position + 1)
        case 0xcc...0xcf:
            let width = 1 << Int(byte - 0xcc)
            let raw = try uint(span, at: position + 1, width: width, end: end)
            guard raw <= UInt64(Int64.max) else { throw .integerOutOfRange(offset: position) }
            return (Int64(raw), position + 1 + width)
        case 0xd0...0xd3:
            let width = 1 << Int(byte - 0xd0)
            let raw = try uint(span, at: position + 1, width: width, end: end)
            let shift = UInt64(64 - 8 * width)
            return (Int64(bitPattern: raw << shift) >> shift, position + 1 + width)
        default: throw try mismatch(.integer, byte, position)
        }
    }

    /// Reads a non-negative integer of any width as `UInt64` (negative values are out of range).
    public mutating func readUInt64() throws(MessagePackError) -> UInt64 {
        let (value, next) = try Self.uint64(bytes.backDeployedSpan, position, end)
        position = next
        return value
    }

    /// `readUInt64` on a span: the value and the offset after it.
    @usableFromInline
    static func uint64(_ span: Span<UInt8>, _ position: Int, _ end: Int) throws(MessagePackError) -> (UInt64, Int) {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        if byte >= 0xcc && byte <= 0xcf {
            let width = 1 << Int(byte - 0xcc)
            return (try uint(span, at: position + 1, width: width, end: end), position + 1 + width)
        }
        let (signed, next) = try int64(span, position, end)
        guard signed >= 0 else { throw .integerOutOfRange(offset: position) }
        return (UInt64(signed), next)
    }

    /// An integer that must fit `T`, read from a span: the value and the offset after it.
    /// Inlinable, so that callers in other modules get it specialized for their `T`.
    @inlinable
    static func integer<T: FixedWidthInteger>(
        _: T.Type,
        _ span: Span<UInt8>,
        _ position: Int,
        _ end: Int
    ) throws(MessagePackError) -> (T, Int) {
        // The common encodings inline: a positive fixint, or a uint 8, 16 or 32 read as one
        // big-endian word where eight bytes can be read. Anything else, or a value that does not
        // fit `T`, takes the general path (which also reports the errors).
        if position >= 0, position < end, end <= span.count {
            let byte = span[position]
            if byte < 0x80, let value = T(exactly: byte) { return (value, position + 1) }
            if byte >= 0xcc && byte <= 0xce {
                let width = 1 << Int(byte &- 0xcc)
                if width < end - position, position + 9 <= span.count {
                    let word = unsafe span.withUnsafeBytes {
                        unsafe $0.loadUnaligned(fromByteOffset: position + 1, as: UInt64.self)
                    }
                    if let value = T(exactly: UInt64(bigEndian: word) >> UInt64(64 - 8 * width)) {
                        return (value, position + 1 + width)
                    }
                }
            }
        }
        if T.isSigned {
            let (value, next) = try int64(span, position, end)
            guard let result = T(exactly: value) else { throw .integerOutOfRange(offset: position) }
            return (result, next)
        }
        let (value, next) = try uint64(span, position, end)
        guard let result = T(exactly: value) else { throw .integerOutOfRange(offset: position) }
        return (result, next)
    }

    /// Reads an integer that must fit `T`.
    @inlinable
    public mutating func readInteger<T: FixedWidthInteger>(_: T.Type = T.self) throws(MessagePackError) -> T {
        let (value, next): (T, Int)
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            (value, next) = try Self.integer(T.self, bytes.span, position, end)
        } else {
            let whole = bytes[...]  // ArraySlice.span back-deploys (a retain more per call)
            (value, next) = try Self.integer(T.self, whole.span, position, end)
        }
        position = next
        return value
    }

    /// Reads a float32 or float64 (integers are converted when exactly representable).
    public mutating func readDouble() throws(MessagePackError) -> Double {
        guard position < end else { throw .truncated(offset: position) }
        switch bytes[position] {
        case 0xca:
            let raw = try uint(at: position + 1, width: 4)
            position += 5
            return Double(Float(bitPattern: UInt32(truncatingIfNeeded: raw)))
        case 0xcb:
            let raw = try uint(at: position + 1, width: 8)
            position += 9
            return Double(bitPattern: raw)
        default:
            let start = position
            guard try peekType() == .integer else { throw try mismatch(.float) }
            if bytes[position] == 0xcf {
                let value = try readUInt64()
                guard let exact = Double(exactly: value) else {
                    position = start
                    throw .integerOutOfRange(offset: start)
                }
                return exact
            }
            let value = try readInt64()
            guard let exact = Double(exactly: value) else {
                position = start
                throw .integerOutOfRange(offset: start)
            }
            return exact
        }
    }

    /// Reads a float32 (or a float64/integer that converts to `Float` without loss).
    public mutating func readFloat() throws(MessagePackError) -> Float {
        guard position < end else { throw .truncated(offset: position) }
        if bytes[position] == 0xca {
            let raw = try uint(at: position + 1, width: 4)
            position += 5
            return Float(bitPattern: UInt32(truncatingIfNeeded: raw))
        }
        let start = position
        let value = try readDouble()
        if value.isNaN { return .nan }
        guard let exact = Float(exactly: value) else {
            position = start
            throw .integerOutOfRange(offset: start)
        }
        return exact
    }

    // MARK: - Strings and binaries

    /// Reads a str header and returns the range of its UTF-8 bytes (not validated).
    public mutating func readStringRange() throws(MessagePackError) -> Range<Int> {
        let range = try Self.stringRange(bytes.backDeployedSpan, position, end)
        position = range.upperBound
        return range
    }

    /// `readStringRange` on a span (the string ends where its range does).
    @inline(__always)
    static func stringRange(_ span: Span<UInt8>, _ position: Int, _ end: Int) throws(MessagePackError) -> Range<Int> {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        let headerLength: Int
        let length: Int
        switch byte {
        case 0xa0...0xbf:
            headerLength = 1
            length = Int(byte & 0x1f)
        case 0xd9...0xdb:
            let width = 1 << Int(byte - 0xd9)
            headerLength = 1 + width
            length = Int(try uint(span, at: position + 1, width: width, end: end))
        default: throw try mismatch(.string, byte, position)
        }
        let start = position + headerLength
        guard length <= end - start else { throw .truncated(offset: position) }
        return start..<(start + length)
    }

    /// A validated string read from a span: the string and the offset after it.
    static func string(_ span: Span<UInt8>, _ position: Int, _ end: Int) throws(MessagePackError) -> (String, Int) {
        let range = try stringRange(span, position, end)
        guard let string = UTF8Validation.string(span.extracting(range)) else { throw .invalidUTF8(offset: position) }
        return (string, range.upperBound)
    }

    /// Reads a str value as a validated Swift string.
    public mutating func readString() throws(MessagePackError) -> String {
        let range = try Self.stringRange(bytes.backDeployedSpan, position, end)
        guard let string = Self.string(bytes, range) else { throw .invalidUTF8(offset: position) }
        position = range.upperBound
        return string
    }

    /// Reads a str value, or nil; returns nil for nil.
    public mutating func readOptionalString() throws(MessagePackError) -> String? {
        if readNilIfPresent() { return nil }
        return try readString()
    }

    /// A validated string made of `bytes[range]`, or nil if the bytes are not UTF-8.
    @inline(__always)
    static func string(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
        UTF8Validation.string(bytes.backDeployedSpan.extracting(range))
    }

    /// Reads a bin header and returns the range of its bytes.
    public mutating func readBinaryRange() throws(MessagePackError) -> Range<Int> {
        let range = try Self.binaryRange(bytes.backDeployedSpan, position, end)
        position = range.upperBound
        return range
    }

    /// `readBinaryRange` on a span (the binary ends where its range does).
    static func binaryRange(_ span: Span<UInt8>, _ position: Int, _ end: Int) throws(MessagePackError) -> Range<Int> {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        guard byte >= 0xc4 && byte <= 0xc6 else { throw try mismatch(.binary, byte, position) }
        let width = 1 << Int(byte - 0xc4)
        let length = Int(try uint(span, at: position + 1, width: width, end: end))
        let start = position + 1 + width
        guard length <= end - start else { throw .truncated(offset: position) }
        return start..<(start + length)
    }

    /// Reads a bin value as a copy of its bytes.
    public mutating func readBinary() throws(MessagePackError) -> [UInt8] {
        Array(bytes[try readBinaryRange()])
    }

    // MARK: - Containers

    /// Reads an array header and returns the number of elements that follow.
    public mutating func readArrayHeader() throws(MessagePackError) -> Int {
        try readContainerHeader(fixBase: 0x90, wide16: 0xdc, .array)
    }

    /// Reads a map header and returns the number of key/value pairs that follow.
    public mutating func readMapHeader() throws(MessagePackError) -> Int {
        try readContainerHeader(fixBase: 0x80, wide16: 0xde, .map)
    }

    /// An array or map header: a fix form (`fixBase` plus a count up to 15) or a 16- or 32-bit
    /// count (`wide16`, `wide16 + 1`).
    @inline(__always)
    private mutating func readContainerHeader(
        fixBase: UInt8,
        wide16: UInt8,
        _ type: MessagePackType
    ) throws(MessagePackError) -> Int {
        guard position < end else { throw .truncated(offset: position) }
        let byte = bytes[position]
        if byte & 0xf0 == fixBase {
            position += 1
            return Int(byte & 0x0f)
        }
        guard byte == wide16 || byte == wide16 + 1 else { throw try mismatch(type) }
        let width = byte == wide16 ? 2 : 4
        let count = Int(try uint(at: position + 1, width: width))
        position += 1 + width
        return count
    }

    // MARK: - Extensions

    /// Reads an extension value and returns its type code and the range of its data.
    public mutating func readExtensionRange() throws(MessagePackError) -> (type: Int8, data: Range<Int>) {
        let value = try Self.extensionRange(bytes.backDeployedSpan, position, end)
        position = value.data.upperBound
        return value
    }

    /// `readExtensionRange` on a span (the extension ends where its data does).
    static func extensionRange(
        _ span: Span<UInt8>,
        _ position: Int,
        _ end: Int
    ) throws(MessagePackError) -> (type: Int8, data: Range<Int>) {
        guard position < end else { throw .truncated(offset: position) }
        let byte = span[position]
        let headerLength: Int
        let length: Int
        switch byte {
        case 0xd4...0xd8:
            headerLength = 2
            length = 1 << Int(byte - 0xd4)
        case 0xc7...0xc9:
            let width = 1 << Int(byte - 0xc7)
            headerLength = 2 + width
            length = Int(try uint(span, at: position + 1, width: width, end: end))
        default: throw try mismatch(.extension, byte, position)
        }
        guard headerLength <= end - position else { throw .truncated(offset: position) }
        let type = Int8(bitPattern: span[position + headerLength - 1])
        let start = position + headerLength
        guard length <= end - start else { throw .truncated(offset: position) }
        return (type, start..<(start + length))
    }

    /// Decodes the data of a timestamp extension (4, 8 or 12 bytes).
    func timestamp(data: Range<Int>, offset: Int) throws(MessagePackError) -> MessagePackTimestamp {
        switch data.count {
        case 4:
            return MessagePackTimestamp(seconds: Int64(try uint(at: data.lowerBound, width: 4)))
        case 8:
            let raw = try uint(at: data.lowerBound, width: 8)
            let nanoseconds = UInt32(raw >> 34)
            guard nanoseconds < 1_000_000_000 else { throw .invalidTimestamp(offset: offset) }
            return MessagePackTimestamp(seconds: Int64(raw & 0x3_ffff_ffff), nanoseconds: nanoseconds)
        case 12:
            let nanoseconds = UInt32(try uint(at: data.lowerBound, width: 4))
            guard nanoseconds < 1_000_000_000 else { throw .invalidTimestamp(offset: offset) }
            let seconds = Int64(bitPattern: try uint(at: data.lowerBound + 4, width: 8))
            return MessagePackTimestamp(seconds: seconds, nanoseconds: nanoseconds)
        default:
            throw .invalidTimestamp(offset: offset)
        }
    }

    /// Reads a timestamp extension (type -1).
    public mutating func readTimestamp() throws(MessagePackError) -> MessagePackTimestamp {
        let start = position
        let (type, data) = try readExtensionRange()
        do throws(MessagePackError) {
            guard type == MessagePackTimestamp.extensionType else { throw .invalidTimestamp(offset: start) }
            return try timestamp(data: data, offset: start)
        } catch {
            position = start
            throw error
        }
    }

    // MARK: - Whole values

    /// Skips one complete value (containers included), validating its structure, strings' UTF-8
    /// excepted, and its nesting depth.
    public mutating func skipValue() throws(MessagePackError) {
        position = try Self.endOfValue(bytes.backDeployedSpan, position, end, outerDepth: 0, maximumDepth: maximumDepth)
    }

    /// The end of the value at `start` (nested `outerDepth` containers deep), its structure and
    /// depth checked: one loop, in which the values left to skip in each open container are
    /// counted on a small inline stack, so that the common case (a map of scalars and strings)
    /// costs one switch per value and no calls.
    static func endOfValue(
        _ span: Span<UInt8>,
        _ start: Int,
        _ end: Int,
        outerDepth: Int,
        maximumDepth: Int
    ) throws(MessagePackError) -> Int {
        var offset = start
        /// Values left in the innermost open container (the top level is a container of one).
        var remaining = 1
        /// `remaining` of each enclosing container, outermost first (values nested deeper than
        /// it holds are skipped by recursion).
        var enclosing = SIMD16<Int>()  // fixed-size storage every supported OS has
        var depth = 0
        while true {
            while remaining == 0 {
                if depth == 0 { return offset }
                depth -= 1
                remaining = enclosing[depth]
            }
            remaining -= 1
            guard offset < end else { throw .truncated(offset: offset) }
            let byte = span[offset]
            switch byte {
            case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3:
                offset += 1
            case 0xa0...0xbf:
                let length = Int(byte & 0x1f)
                guard length < end - offset else { throw .truncated(offset: offset) }
                offset += 1 + length
            case 0xd9...0xdb:
                offset = try Self.stringRange(span, offset, end).upperBound
            case 0xcc...0xd3, 0xca, 0xcb:
                let width: Int
                switch byte {
                case 0xca: width = 4
                case 0xcb: width = 8
                case 0xcc...0xcf: width = 1 << Int(byte - 0xcc)
                default: width = 1 << Int(byte - 0xd0)
                }
                guard width < end - offset else { throw .truncated(offset: offset) }
                offset += 1 + width
            case 0x80...0x8f, 0xde, 0xdf, 0x90...0x9f, 0xdc, 0xdd:
                guard outerDepth + depth < maximumDepth else { throw .depthLimitExceeded(limit: maximumDepth) }
                guard depth < enclosing.scalarCount else {
                    offset = try endOfValue(
                        span,
                        offset,
                        end,
                        outerDepth: outerDepth + depth,
                        maximumDepth: maximumDepth
                    )
                    continue
                }
                let count: Int
                switch byte {
                case 0x80...0x8f:
                    count = Int(byte & 0x0f) * 2
                    offset += 1
                case 0x90...0x9f:
                    count = Int(byte & 0x0f)
                    offset += 1
                default:
                    let width = byte == 0xdc || byte == 0xde ? 2 : 4
                    let elements = Int(try Self.uint(span, at: offset + 1, width: width, end: end))
                    count = byte >= 0xde ? elements * 2 : elements
                    offset += 1 + width
                }
                enclosing[depth] = remaining
                depth += 1
                remaining = count
            case 0xc4...0xc6: offset = try Self.binaryRange(span, offset, end).upperBound
            case 0xc7...0xc9, 0xd4...0xd8: offset = try Self.extensionRange(span, offset, end).data.upperBound
            default:  // 0xc1
                throw .reservedByte(offset: offset)
            }
        }
    }

    /// Reads one complete value as a tree (depth-limited; strings validated).
    public mutating func readValue() throws(MessagePackError) -> MessagePackValue {
        let start = position
        do {
            return try readValue(depth: 0)
        } catch {
            position = start
            throw error
        }
    }

    private mutating func readValue(depth: Int) throws(MessagePackError) -> MessagePackValue {
        switch try peekType() {
        case .nil:
            position += 1
            return .nil
        case .bool: return .bool(try readBool())
        case .integer:
            if bytes[position] == 0xcf { return .uint(try readUInt64()) }
            let value = try readInt64()
            return value < 0 ? .int(value) : .uint(UInt64(value))
        case .float:
            if bytes[position] == 0xca { return .float(try readFloat()) }
            return .double(try readDouble())
        case .string: return .string(try readString())
        case .binary: return .binary(try readBinary())
        case .array:
            guard depth < maximumDepth else { throw .depthLimitExceeded(limit: maximumDepth) }
            let count = try readArrayHeader()
            var elements: [MessagePackValue] = []
            elements.reserveCapacity(min(count, end - position))
            for _ in 0..<count { elements.append(try readValue(depth: depth + 1)) }
            return .array(elements)
        case .map:
            guard depth < maximumDepth else { throw .depthLimitExceeded(limit: maximumDepth) }
            let count = try readMapHeader()
            var pairs: [MessagePackPair] = []
            pairs.reserveCapacity(min(count, (end - position) / 2))
            for _ in 0..<count {
                let key = try readValue(depth: depth + 1)
                pairs.append(MessagePackPair(key, try readValue(depth: depth + 1)))
            }
            return .map(pairs)
        case .extension:
            let start = position
            let (type, data) = try readExtensionRange()
            if type == MessagePackTimestamp.extensionType {
                return .timestamp(try timestamp(data: data, offset: start))
            }
            return .extension(type: type, data: Array(bytes[data]))
        }
    }

    private func mismatch(_ expected: MessagePackType) throws(MessagePackError) -> MessagePackError {
        .typeMismatch(expected: expected, found: try peekType(), offset: position)
    }
}
