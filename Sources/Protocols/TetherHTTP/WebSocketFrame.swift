@_spi(TetherInternal) import TetherCore

/// Why a WebSocket connection fails: the close code to send (RFC 6455 §7.4.1) and a description.
public struct WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The close code: 1002 protocol error, 1007 invalid data, 1009 too big, 1006 abnormal end
    /// (never sent), or the handshake's own failures (`handshakeFailed`).
    public let code: UInt16
    /// What exactly.
    public let message: String

    /// An error with `code`.
    public init(code: UInt16, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The opening handshake failed (the server answered but not as RFC 6455 §4.1 requires).
    public static let handshakeFailedCode: UInt16 = 0

    public var description: String { code == 0 ? message : "\(code): \(message)" }
}

/// A frame's opcode (RFC 6455 §5.2).
public enum WebSocketOpcode: UInt8, Hashable, Sendable {
    /// A continuation of a fragmented message.
    case continuation = 0x0
    /// A text frame.
    case text = 0x1
    /// A binary frame.
    case binary = 0x2
    /// A close frame.
    case close = 0x8
    /// A ping.
    case ping = 0x9
    /// A pong.
    case pong = 0xA

    /// Whether this is a control frame (close, ping, pong).
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One frame, unmasked.
public struct WebSocketFrame: Hashable, Sendable {
    /// Whether this is the message's last frame.
    public var isFinal: Bool
    /// The opcode.
    public var opcode: WebSocketOpcode
    /// The payload (unmasked).
    public var payload: [UInt8]

    /// A frame.
    public init(isFinal: Bool = true, opcode: WebSocketOpcode, payload: [UInt8]) {
        self.isFinal = isFinal
        self.opcode = opcode
        self.payload = payload
    }

    /// Appends the frame as a client writes it: masked with `mask` (RFC 6455 §5.3).
    public func write(maskedWith mask: UInt32, into bytes: inout [UInt8]) {
        bytes.append((isFinal ? 0x80 : 0) | opcode.rawValue)
        let count = payload.count
        if count < 126 {
            bytes.append(0x80 | UInt8(count))
        } else if count <= 0xFFFF {
            bytes += [0x80 | 126, UInt8(count >> 8), UInt8(truncatingIfNeeded: count)]
        } else {
            bytes.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(shift)))
            }
        }
        let key = [
            UInt8(mask >> 24), UInt8(truncatingIfNeeded: mask >> 16), UInt8(truncatingIfNeeded: mask >> 8),
            UInt8(truncatingIfNeeded: mask),
        ]
        bytes += key
        let start = bytes.count
        bytes += payload
        for index in 0..<count { bytes[start + index] ^= key[index & 3] }
    }
}

/// An incremental frame decoder for what a server sends (RFC 6455 §5.2): any split of the input
/// gives the same frames; a partial frame keeps its progress. Server frames must not be masked
/// (§5.1), reserved bits must be clear (no extension is negotiated), control frames must be final
/// and at most 125 bytes, and a frame must not exceed `maximumFrameSize` (close code 1009).
public struct WebSocketFrameDecoder: Sendable {
    /// The largest frame payload accepted.
    public let maximumFrameSize: Int
    private var buffer: [UInt8] = []
    private var position = 0

    /// A decoder.
    public init(maximumFrameSize: Int) {
        self.maximumFrameSize = maximumFrameSize
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        append(bytes.backDeployedSpan)
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        append(bytes.span)
    }

    /// Adds received bytes.
    public mutating func append(_ bytes: Span<UInt8>) {
        // Drop what was decoded: all of it, or the front once it outweighs the partial frame
        // (reads that always end inside a frame must not grow the buffer without bound).
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.count <= 1 << 20)
            position = 0
        } else if position >= 4096 && position * 2 >= buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(copying: bytes)
    }

    /// The bytes held (decoded ones not yet dropped included), for tests of the bound.
    var bufferedByteCount: Int { buffer.count }

    /// Whether bytes of an incomplete frame are buffered.
    public var hasPartialFrame: Bool { position < buffer.count }

    /// The next complete frame, or nil if more bytes are needed.
    public mutating func next() throws(WebSocketError) -> WebSocketFrame? {
        let available = buffer.count - position
        guard available >= 2 else { return nil }
        let first = buffer[position]
        let second = buffer[position + 1]
        guard first & 0x70 == 0 else { throw WebSocketError(code: 1002, "A frame has reserved bits set.") }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
            throw WebSocketError(code: 1002, "A frame has the unknown opcode \(first & 0x0F).")
        }
        guard second & 0x80 == 0 else { throw WebSocketError(code: 1002, "The server masked a frame.") }
        let isFinal = first & 0x80 != 0
        var headerLength = 2
        var length = Int(second & 0x7F)
        if opcode.isControl {
            guard isFinal else { throw WebSocketError(code: 1002, "A control frame is fragmented.") }
            guard length <= 125 else { throw WebSocketError(code: 1002, "A control frame is longer than 125 bytes.") }
        }
        if length == 126 {
            guard available >= 4 else { return nil }
            length = Int(buffer[position + 2]) << 8 | Int(buffer[position + 3])
            guard length >= 126 else { throw WebSocketError(code: 1002, "A frame length is not minimally encoded.") }
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            var value: UInt64 = 0
            for index in 2..<10 { value = value << 8 | UInt64(buffer[position + index]) }
            guard value >> 63 == 0 else { throw WebSocketError(code: 1002, "A frame length has its top bit set.") }
            guard value > 0xFFFF else { throw WebSocketError(code: 1002, "A frame length is not minimally encoded.") }
            guard value <= UInt64(maximumFrameSize) else {
                throw WebSocketError(code: 1009, "A frame is larger than \(maximumFrameSize) bytes.")
            }
            length = Int(value)
            headerLength = 10
        }
        guard length <= maximumFrameSize else {
            throw WebSocketError(code: 1009, "A frame is larger than \(maximumFrameSize) bytes.")
        }
        guard available >= headerLength + length else { return nil }
        let start = position + headerLength
        let payload = Array(buffer[start..<(start + length)])
        position = start + length
        return WebSocketFrame(isFinal: isFinal, opcode: opcode, payload: payload)
    }
}
