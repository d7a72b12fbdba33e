@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherText

/// The client side of a WebSocket connection (RFC 6455) as a sans-IO value: the opening
/// handshake, masked frames out, frames in (any split), fragmented messages, UTF-8 validation of
/// text, ping → pong, the closing handshake, and protocol errors answered with the right close
/// code (1002, 1007, 1009).
///
/// ```swift
/// var ws = WebSocketClient(host: "example.com", target: "/hub?id=abc", headers: ["Authorization": "Bearer …"])
/// socket.write(ws.openingHandshake())
/// ws.receive(bytesFromSocket.span)
/// while let event = try ws.nextEvent() { … }          // .opened, .message, .pong, .closed
/// ws.send(.text(Array(json.utf8)));  socket.write(ws.takeOutput())
/// ```
///
/// States: `idle` → (`openingHandshake`) `connecting` → (101 received) `open` → (`close` sent)
/// `closing` → (the server's close) `closed`; a close from the server is answered and ends in
/// `closed` at once; an error ends in `closed` after queueing the close frame with its code.
/// After `closed` the driver closes the TCP connection once the output is written.
public struct WebSocketClient: Sendable {
    /// Limits, each closed with 1009 when exceeded.
    public struct Configuration: Sendable, Hashable {
        /// The largest frame payload accepted (default 1 MiB).
        public var maximumFrameSize: Int
        /// The largest message (all fragments) accepted (default 1 MiB).
        public var maximumMessageSize: Int
        /// Limits for the handshake response.
        public var handshakeLimits: HTTPResponseParser.Configuration

        /// Limits.
        public init(
            maximumFrameSize: Int = 1 << 20,
            maximumMessageSize: Int = 1 << 20,
            handshakeLimits: HTTPResponseParser.Configuration = .init(maximumBodySize: 64 * 1024)
        ) {
            self.maximumFrameSize = maximumFrameSize
            self.maximumMessageSize = maximumMessageSize
            self.handshakeLimits = handshakeLimits
        }
    }

    /// A message: text (valid UTF-8, kept as bytes) or binary.
    public enum Message: Hashable, Sendable {
        /// A text message (UTF-8).
        case text([UInt8])
        /// A binary message.
        case binary([UInt8])
    }

    /// What the connection reports.
    public enum Event: Hashable, Sendable {
        /// The handshake succeeded; messages flow.
        case opened
        /// A message arrived.
        case message(Message)
        /// A pong arrived (the answer to `ping`, or unsolicited).
        case pong([UInt8])
        /// The connection is closed: the code and reason the server sent (nil code: none given,
        /// 1005), after the closing handshake.
        case closed(code: UInt16?, reason: String)
    }

    /// The connection's states.
    public enum State: Hashable, Sendable {
        /// Not started.
        case idle
        /// The upgrade request is out.
        case connecting
        /// Messages flow.
        case open
        /// A close frame is out or came in.
        case closing
        /// Closed.
        case closed
    }

    /// The GUID RFC 6455 §1.3 appends to the key.
    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// The limits.
    public let configuration: Configuration
    private let host: String
    private let target: String
    private let headers: HTTPHeaders
    private let random: @Sendable () -> UInt64
    private let key: String
    /// The state.
    public private(set) var state = State.idle
    /// The server's handshake response, once received (its status says why a handshake failed).
    public private(set) var handshakeResponse: HTTPResponseHead?
    private var response: HTTPResponseParser
    private var decoder: WebSocketFrameDecoder
    private var fragments: [UInt8] = []
    private var fragmentOpcode: WebSocketOpcode?
    private var output: [UInt8] = []
    private var failure: WebSocketError?
    private var pendingEvents: [Event] = []

    /// A connection to `target` (path and query) on `host` (the `Host` header's value), with
    /// extra handshake `headers`. `random` gives the key and the masks (default: the system's
    /// secure generator; RFC 6455 §10.3 wants masks no one can predict).
    public init(
        host: String,
        target: String,
        headers: HTTPHeaders = [:],
        configuration: Configuration = Configuration(),
        random: @escaping @Sendable () -> UInt64 = {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        }
    ) {
        self.host = host
        self.target = target
        self.headers = headers
        self.configuration = configuration
        self.random = random
        var keyBytes: [UInt8] = []
        for _ in 0..<2 {
            let word = random()
            for shift in stride(from: 0, to: 64, by: 8) {
                keyBytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
            }
        }
        key = Base64.encode(keyBytes)
        response = HTTPResponseParser(configuration: configuration.handshakeLimits)
        decoder = WebSocketFrameDecoder(maximumFrameSize: configuration.maximumFrameSize)
    }

    /// The value `Sec-WebSocket-Accept` must have for `key` (RFC 6455 §4.2.2).
    public static func acceptValue(for key: String) -> String {
        Base64.encode(SHA1.digest(Array((key + acceptGUID).utf8)))
    }

    /// The opening handshake request, to write once the TCP (or TLS) connection is up.
    public mutating func openingHandshake() -> [UInt8] {
        precondition(state == .idle, "the opening handshake is sent once")
        state = .connecting
        var request = HTTPRequest(method: "GET", target: target, host: host)
        request.headers.add("Upgrade", "websocket")
        request.headers.add("Connection", "Upgrade")
        request.headers.add("Sec-WebSocket-Key", key)
        request.headers.add("Sec-WebSocket-Version", "13")
        for field in headers { request.headers.add(field.name, field.value) }
        return request.serialize()
    }

    /// Adds bytes received from the server.
    public mutating func receive(_ bytes: Span<UInt8>) {
        switch state {
        case .idle, .closed:
            return
        case .connecting:
            response.append(bytes)
        case .open, .closing:
            decoder.append(bytes)
        }
    }

    /// Adds bytes received from the server.
    public mutating func receive(_ bytes: [UInt8]) {
        receive(bytes.backDeployedSpan)
    }

    /// Adds bytes received from the server.
    public mutating func receive(_ bytes: ArraySlice<UInt8>) {
        receive(bytes.span)
    }

    /// The next event, or nil if more bytes are needed. A protocol violation throws (the close
    /// frame with its code is then in `takeOutput()`, and the state is `closed`).
    public mutating func nextEvent() throws(WebSocketError) -> Event? {
        if let failure { throw failure }
        if !pendingEvents.isEmpty { return pendingEvents.removeFirst() }
        do throws(WebSocketError) {
            switch state {
            case .idle, .closed:
                return nil
            case .connecting:
                return try handshakeStep()
            case .open, .closing:
                while let frame = try decoder.next() {
                    if let event = try handle(frame) { return event }
                    if state == .closed { return nil }
                }
                return nil
            }
        } catch {
            fail(error)
            throw error
        }
    }

    /// Sends a message. Precondition: the connection is open.
    public mutating func send(_ message: Message) {
        precondition(state == .open, "messages are sent on an open WebSocket")
        switch message {
        case .text(let bytes): write(WebSocketFrame(opcode: .text, payload: bytes))
        case .binary(let bytes): write(WebSocketFrame(opcode: .binary, payload: bytes))
        }
    }

    /// Sends a ping (at most 125 bytes of payload).
    public mutating func ping(_ payload: [UInt8] = []) {
        precondition(payload.count <= 125, "a ping carries at most 125 bytes")
        guard state == .open else { return }
        write(WebSocketFrame(opcode: .ping, payload: payload))
    }

    /// Starts the closing handshake (code 1000 by default; `reason` at most 123 bytes of UTF-8).
    public mutating func close(code: UInt16 = 1000, reason: String = "") {
        guard state == .open else {
            if state == .connecting || state == .idle { state = .closed }
            return
        }
        write(Self.closeFrame(code: code, reason: reason))
        state = .closing
    }

    /// The bytes to write to the server now.
    public mutating func takeOutput() -> [UInt8] {
        defer { output.removeAll(keepingCapacity: true) }
        return output
    }

    // MARK: - Internals

    private mutating func write(_ frame: WebSocketFrame) {
        frame.write(maskedWith: UInt32(truncatingIfNeeded: random()), into: &output)
    }

    static func closeFrame(code: UInt16, reason: String) -> WebSocketFrame {
        let text = Array(reason.utf8.prefix(123))
        return WebSocketFrame(opcode: .close, payload: [UInt8(code >> 8), UInt8(truncatingIfNeeded: code)] + text)
    }

    private mutating func fail(_ error: WebSocketError) {
        if failure == nil { failure = error }
        if (state == .open || state == .closing) && error.code >= 1000 {
            if state == .open { write(Self.closeFrame(code: error.code, reason: "")) }
        }
        state = .closed
    }

    private mutating func handshakeStep() throws(WebSocketError) -> Event? {
        let complete: HTTPResponse?
        do throws(HTTPError) {
            complete = try response.response()
        } catch {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The handshake response is invalid: \(error.message)"
            )
        }
        guard let complete else { return nil }
        let head = complete.head
        handshakeResponse = head
        guard head.status == 101 else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The server refused the WebSocket upgrade with status \(head.status) \(head.reason)."
            )
        }
        guard head.headers.contains("Upgrade", token: "websocket") else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The upgrade response has no 'Upgrade: websocket'."
            )
        }
        guard head.headers.contains("Connection", token: "upgrade") else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The upgrade response has no 'Connection: Upgrade'."
            )
        }
        guard head.headers["Sec-WebSocket-Accept"] == Self.acceptValue(for: key) else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "Sec-WebSocket-Accept does not match the key."
            )
        }
        guard head.headers["Sec-WebSocket-Extensions"] == nil else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The server chose an extension none was offered of."
            )
        }
        guard head.headers["Sec-WebSocket-Protocol"] == nil || headers["Sec-WebSocket-Protocol"] != nil else {
            throw WebSocketError(
                code: WebSocketError.handshakeFailedCode,
                "The server chose a subprotocol none was offered of."
            )
        }
        state = .open
        decoder.append(response.remainder.backDeployedSpan)
        return .opened
    }

    /// The event a frame makes, if any.
    private mutating func handle(_ frame: WebSocketFrame) throws(WebSocketError) -> Event? {
        switch frame.opcode {
        case .text, .binary:
            guard fragmentOpcode == nil else {
                throw WebSocketError(code: 1002, "A new message began before the fragmented one ended.")
            }
            guard frame.isFinal else {
                fragmentOpcode = frame.opcode
                fragments = frame.payload
                try checkMessageSize(fragments.count)
                return nil
            }
            return try message(frame.opcode, frame.payload)
        case .continuation:
            guard let opcode = fragmentOpcode else {
                throw WebSocketError(code: 1002, "A continuation frame came without a message to continue.")
            }
            try checkMessageSize(fragments.count + frame.payload.count)
            fragments += frame.payload
            guard frame.isFinal else { return nil }
            let payload = fragments
            fragments = []
            fragmentOpcode = nil
            return try message(opcode, payload)
        case .ping:
            if state == .open { write(WebSocketFrame(opcode: .pong, payload: frame.payload)) }
            return nil
        case .pong:
            return .pong(frame.payload)
        case .close:
            return try closeReceived(frame.payload)
        }
    }

    private func checkMessageSize(_ size: Int) throws(WebSocketError) {
        guard size <= configuration.maximumMessageSize else {
            throw WebSocketError(code: 1009, "A message is larger than \(configuration.maximumMessageSize) bytes.")
        }
    }

    private func message(_ opcode: WebSocketOpcode, _ payload: [UInt8]) throws(WebSocketError) -> Event? {
        // A message that arrives while our close is out is still delivered (RFC 6455 §7.1.1).
        if opcode == .text {
            guard UTF8Validation.check(payload.backDeployedSpan) != .invalid else {
                throw WebSocketError(code: 1007, "A text message is not valid UTF-8.")
            }
            return .message(.text(payload))
        }
        return .message(.binary(payload))
    }

    private mutating func closeReceived(_ payload: [UInt8]) throws(WebSocketError) -> Event {
        var code: UInt16?
        var reason = ""
        if payload.count == 1 { throw WebSocketError(code: 1002, "A close frame has a one-byte payload.") }
        if payload.count >= 2 {
            let value = UInt16(payload[0]) << 8 | UInt16(payload[1])
            let valid =
                (1000...1003).contains(value) || (1007...1014).contains(value) || (3000...4999).contains(value)
            guard valid else { throw WebSocketError(code: 1002, "A close frame has the invalid code \(value).") }
            let reasonBytes = Array(payload[2...])
            guard let text = UTF8Validation.string(reasonBytes.backDeployedSpan) else {
                throw WebSocketError(code: 1007, "A close reason is not valid UTF-8.")
            }
            code = value
            reason = text
        }
        if state == .open {
            // Answer with the same code (RFC 6455 §5.5.1); none when none was given.
            write(code.map { Self.closeFrame(code: $0, reason: "") } ?? WebSocketFrame(opcode: .close, payload: []))
        }
        state = .closed
        return .closed(code: code, reason: reason)
    }
}
