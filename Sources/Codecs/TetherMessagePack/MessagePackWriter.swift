@_spi(TetherInternal) import TetherCore

/// Appends MessagePack values to a byte array, always in the shortest encoding of each value.
///
/// Non-negative integers use positive fixint or the uint family, negative ones negative fixint or
/// the int family, as the reference implementations (msgpack-c, MessagePack-CSharp) do.
public struct MessagePackWriter: Sendable {
    /// The bytes written so far.
    public var bytes: [UInt8]

    /// A writer that appends to `bytes` (empty by default).
    public init(bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var shift = (MemoryLayout<T>.size - 1) * 8
        while shift >= 0 {
            bytes.append(UInt8(truncatingIfNeeded: value >> shift))
            shift -= 8
        }
    }

    /// Writes nil.
    public mutating func writeNil() {
        bytes.append(0xc0)
    }

    /// Writes a boolean.
    public mutating func writeBool(_ value: Bool) {
        bytes.append(value ? 0xc3 : 0xc2)
    }

    /// Writes a signed integer in its shortest form.
    public mutating func writeInt(_ value: Int64) {
        if value >= 0 {
            writeUInt(UInt64(value))
        } else if value >= -32 {
            bytes.append(UInt8(bitPattern: Int8(value)))
        } else if value >= Int64(Int8.min) {
            bytes.append(0xd0)
            bytes.append(UInt8(bitPattern: Int8(value)))
        } else if value >= Int64(Int16.min) {
            bytes.append(0xd1)
            appendBigEndian(Int16(value))
        } else if value >= Int64(Int32.min) {
            bytes.append(0xd2)
            appendBigEndian(Int32(value))
        } else {
            bytes.append(0xd3)
            appendBigEndian(value)
        }
    }

    /// Writes a non-negative integer in its shortest form.
    public mutating func writeUInt(_ value: UInt64) {
        if value < 0x80 {
            bytes.append(UInt8(value))
        } else if value <= UInt64(UInt8.max) {
            bytes.append(0xcc)
            bytes.append(UInt8(value))
        } else if value <= UInt64(UInt16.max) {
            bytes.append(0xcd)
            appendBigEndian(UInt16(value))
        } else if value <= UInt64(UInt32.max) {
            bytes.append(0xce)
            appendBigEndian(UInt32(value))
        } else {
            bytes.append(0xcf)
            appendBigEndian(value)
        }
    }

    /// Writes a float32.
    public mutating func writeFloat(_ value: Float) {
        bytes.append(0xca)
        appendBigEndian(value.bitPattern)
    }

    /// Writes a float64.
    public mutating func writeDouble(_ value: Double) {
        bytes.append(0xcb)
        appendBigEndian(value.bitPattern)
    }

    /// Writes the header of a str value of `length` bytes.
    public mutating func writeStringHeader(length: Int) {
        precondition(length >= 0 && UInt64(length) <= UInt64(UInt32.max), "string too long for MessagePack")
        if length < 32 {
            bytes.append(0xa0 | UInt8(length))
        } else if length <= Int(UInt8.max) {
            bytes.append(0xd9)
            bytes.append(UInt8(length))
        } else if length <= Int(UInt16.max) {
            bytes.append(0xda)
            appendBigEndian(UInt16(length))
        } else {
            bytes.append(0xdb)
            appendBigEndian(UInt32(length))
        }
    }

    /// Writes a str value.
    public mutating func writeString(_ value: String) {
        value.withUTF8Span { utf8 in
            let length = utf8.count
            guard length < 32 else {
                writeStringHeader(length: length)
                bytes.append(copying: utf8)
                return
            }
            // fixstr: header and bytes in one append.
            bytes.append(addingCapacity: 1 + length) { output in
                output.append(0xa0 | UInt8(length))
                unsafe output.withUnsafeMutableBufferPointer { buffer, initialized in
                    if length > 0 {
                        unsafe utf8.withUnsafeBufferPointer { source in
                            unsafe buffer.baseAddress!.advanced(by: initialized).initialize(
                                from: source.baseAddress!,
                                count: length
                            )
                        }
                    }
                    initialized += length
                }
            }
        }
    }

    /// Writes a bin value.
    public mutating func writeBinary(_ value: some Collection<UInt8>) {
        let length = value.count
        precondition(UInt64(length) <= UInt64(UInt32.max), "binary too long for MessagePack")
        if length <= Int(UInt8.max) {
            bytes.append(0xc4)
            bytes.append(UInt8(length))
        } else if length <= Int(UInt16.max) {
            bytes.append(0xc5)
            appendBigEndian(UInt16(length))
        } else {
            bytes.append(0xc6)
            appendBigEndian(UInt32(length))
        }
        bytes.append(contentsOf: value)
    }

    /// Writes the header of an array of `count` elements; the caller then writes the elements.
    public mutating func writeArrayHeader(count: Int) {
        precondition(count >= 0 && UInt64(count) <= UInt64(UInt32.max), "array too long for MessagePack")
        if count < 16 {
            bytes.append(0x90 | UInt8(count))
        } else if count <= Int(UInt16.max) {
            bytes.append(0xdc)
            appendBigEndian(UInt16(count))
        } else {
            bytes.append(0xdd)
            appendBigEndian(UInt32(count))
        }
    }

    /// Writes the header of a map of `count` pairs; the caller then writes keys and values in turn.
    public mutating func writeMapHeader(count: Int) {
        precondition(count >= 0 && UInt64(count) <= UInt64(UInt32.max), "map too long for MessagePack")
        if count < 16 {
            bytes.append(0x80 | UInt8(count))
        } else if count <= Int(UInt16.max) {
            bytes.append(0xde)
            appendBigEndian(UInt16(count))
        } else {
            bytes.append(0xdf)
            appendBigEndian(UInt32(count))
        }
    }

    /// Writes an extension value (fixext when the data length is 1, 2, 4, 8 or 16).
    public mutating func writeExtension(type: Int8, data: some Collection<UInt8>) {
        let length = data.count
        precondition(UInt64(length) <= UInt64(UInt32.max), "extension too long for MessagePack")
        switch length {
        case 1: bytes.append(0xd4)
        case 2: bytes.append(0xd5)
        case 4: bytes.append(0xd6)
        case 8: bytes.append(0xd7)
        case 16: bytes.append(0xd8)
        case 0...Int(UInt8.max):
            bytes.append(0xc7)
            bytes.append(UInt8(length))
        case 0...Int(UInt16.max):
            bytes.append(0xc8)
            appendBigEndian(UInt16(length))
        default:
            bytes.append(0xc9)
            appendBigEndian(UInt32(length))
        }
        bytes.append(UInt8(bitPattern: type))
        bytes.append(contentsOf: data)
    }

    /// Writes a timestamp in the shortest of its three layouts (32, 64 or 96 bits).
    public mutating func writeTimestamp(_ value: MessagePackTimestamp) {
        if value.seconds >> 34 == 0 {
            if value.nanoseconds == 0 && value.seconds <= Int64(UInt32.max) {
                bytes.append(0xd6)
                bytes.append(0xff)
                appendBigEndian(UInt32(value.seconds))
            } else {
                bytes.append(0xd7)
                bytes.append(0xff)
                appendBigEndian(UInt64(value.nanoseconds) << 34 | UInt64(value.seconds))
            }
        } else {
            bytes.append(0xc7)
            bytes.append(12)
            bytes.append(0xff)
            appendBigEndian(value.nanoseconds)
            appendBigEndian(value.seconds)
        }
    }

    /// Writes a whole value tree.
    public mutating func write(_ value: MessagePackValue) {
        switch value {
        case .nil: writeNil()
        case .bool(let value): writeBool(value)
        case .int(let value): writeInt(value)
        case .uint(let value): writeUInt(value)
        case .float(let value): writeFloat(value)
        case .double(let value): writeDouble(value)
        case .string(let value): writeString(value)
        case .binary(let value): writeBinary(value)
        case .array(let elements):
            writeArrayHeader(count: elements.count)
            for element in elements { write(element) }
        case .map(let pairs):
            writeMapHeader(count: pairs.count)
            for pair in pairs {
                write(pair.key)
                write(pair.value)
            }
        case .extension(let type, let data): writeExtension(type: type, data: data)
        case .timestamp(let timestamp): writeTimestamp(timestamp)
        }
    }
}
