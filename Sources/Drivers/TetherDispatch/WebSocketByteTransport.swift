public import Dispatch
public import TetherCore
import TetherHTTP

/// A byte transport over a WebSocket (RFC 6455) for protocols framed by its messages, such as
/// XMPP over WebSocket (RFC 7395): each `send` goes out as one text message, each message
/// received is handed up as one `received`. It runs over another byte transport from the
/// options (TLS from the first byte for `wss`, the certificate checked for the URL's host, with
/// the same trust settings), and reports `connected` once the upgrade is accepted with the
/// required subprotocol.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
public final class WebSocketByteTransport: ByteTransport, @unchecked Sendable {
    private let url: ServerURL
    private let subprotocol: String
    private let options: ConnectionOptions
    private let queue: DispatchQueue
    private var connection: (any ByteTransport)?
    private var socket: WebSocketClient
    private var onEvent: ((ByteTransportEvent) -> Void)?

    /// A transport to `url` (`ws` or `wss`) asking for `subprotocol`; a message larger than
    /// `maximumMessageSize` ends the connection with an error.
    public init(
        url: ServerURL,
        subprotocol: String,
        userAgent: String,
        maximumMessageSize: Int,
        options: ConnectionOptions,
        queue: DispatchQueue,
        onEvent: @escaping (ByteTransportEvent) -> Void
    ) {
        self.url = url
        self.subprotocol = subprotocol
        self.options = options
        self.queue = queue
        self.onEvent = onEvent
        var headers = HTTPHeaders()
        headers.add("Sec-WebSocket-Protocol", subprotocol)
        headers.add("User-Agent", userAgent)
        socket = WebSocketClient(
            host: url.hostHeader,
            target: url.target,
            headers: headers,
            configuration: .init(maximumFrameSize: maximumMessageSize, maximumMessageSize: maximumMessageSize)
        )
    }

    public func start() {
        connection = options.makeTransport(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    /// Sends `bytes` as one text message.
    public func send(_ bytes: [UInt8]) {
        guard socket.state == .open else { return }
        socket.send(.text(bytes))
        flush()
    }

    /// TLS cannot be inserted into a WebSocket (RFC 7395 §3.7: `wss` instead); the transport
    /// ends with `tlsFailed`.
    public func startTLS(serverName: String, bufferedBytes: [UInt8]) {
        queue.async { [weak self] in
            self?.end(.tlsFailed("TLS cannot be started inside a WebSocket; use a wss:// URL"))
        }
    }

    /// Sends the closing handshake and closes; no event follows.
    public func close() {
        onEvent = nil
        if socket.state == .open { socket.close() }
        flush()
        connection?.close()
        connection = nil
    }

    public var pendingWriteCount: Int { connection?.pendingWriteCount ?? 0 }

    public var tlsVersion: String? { connection?.tlsVersion }

    private func flush() {
        let output = socket.takeOutput()
        if !output.isEmpty { connection?.send(output) }
    }

    /// Reports `event` as the last one: the connection is closed and nothing follows.
    private func end(_ event: ByteTransportEvent) {
        let report = onEvent
        onEvent = nil
        flush()
        connection?.close()
        connection = nil
        report?(event)
    }

    private func event(_ event: ByteTransportEvent) {
        switch event {
        case .connected:
            connection?.send(socket.openingHandshake())
        case .received(let bytes):
            received(bytes)
        case .closed(let error):
            end(.closed(error ?? (socket.state == .connecting ? "closed during the WebSocket upgrade" : nil)))
        case .tlsFailed, .certificateRefused:
            end(event)
        case .drained:
            onEvent?(.drained)
        case .tlsEstablished:
            break
        }
    }

    private func received(_ bytes: [UInt8]) {
        socket.receive(bytes)
        do throws(WebSocketError) {
            while let event = try socket.nextEvent() {
                switch event {
                case .opened:
                    let chosen = socket.handshakeResponse?.headers["Sec-WebSocket-Protocol"]
                    guard chosen == subprotocol else {
                        return end(
                            .closed(
                                "the server did not accept the WebSocket subprotocol '\(subprotocol)'"
                                    + (chosen.map { " (it chose '\($0)')" } ?? "")
                            )
                        )
                    }
                    onEvent?(.connected)
                case .message(.text(let payload)):
                    onEvent?(.received(payload))
                case .message(.binary):
                    return end(.closed("the server sent a binary WebSocket message; '\(subprotocol)' uses text"))
                case .pong:
                    break
                case .closed(let code, let reason):
                    let normal = code == nil || code == 1000
                    return end(
                        .closed(normal ? nil : "closed with code \(code!)\(reason.isEmpty ? "" : ": \(reason)")")
                    )
                }
                guard onEvent != nil else { return }
            }
            flush()  // pongs
        } catch {
            end(.closed(error.message))
        }
    }
}
