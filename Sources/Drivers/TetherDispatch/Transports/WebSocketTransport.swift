import Dispatch
import TetherCore
import TetherHTTP

/// A message transport over a WebSocket (RFC 6455), for every protocol framed by its messages
/// (SignalR; XMPP over WebSocket, RFC 7395): each `send` goes out as one message in the request's
/// format, each message received is handed up as one `received`. It runs over a TCP transport
/// from the options' factory (TLS from the first byte for `wss`, the certificate checked for the
/// URL's host, with the same trust settings), and reports `connected` once the upgrade is accepted
/// (with the subprotocol asked for, when one is).
///
/// What ends it, as `closed`: the server's Close (nil for 1000 or no code), the connection's end
/// (`connectionFailed` during the upgrade, `connectionLost` after), an upgrade refused (401:
/// `unauthorized`; another answer: `rejected`), a frame that breaks RFC 6455, a message over the
/// request's size limit, in the other format when only one is taken, or a missing subprotocol
/// (`protocolViolation`).
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class WebSocketTransport: Transport, @unchecked Sendable {
    private let url: ServerURL
    private let subprotocol: String?
    private let format: MessageFormat
    private let acceptsEitherFormat: Bool
    private let options: ConnectionOptions
    private let queue: DispatchQueue
    private var connection: (any Transport)?
    private var socket: WebSocketClient
    private var onEvent: ((TransportEvent) -> Void)?

    /// A transport to `url` (`ws` or `wss`) asking for `subprotocol`, with the request's headers,
    /// format and message size limit.
    init(
        url: ServerURL,
        subprotocol: String?,
        request: TransportRequest,
        options: ConnectionOptions,
        queue: DispatchQueue,
        onEvent: @escaping (TransportEvent) -> Void
    ) {
        self.url = url
        self.subprotocol = subprotocol
        format = request.messageFormat
        acceptsEitherFormat = request.acceptsEitherFormat
        self.options = options
        self.queue = queue
        self.onEvent = onEvent
        var headers = HTTPHeaders(sortedFrom: request.headers, userAgent: options.userAgent)
        if let subprotocol { headers.add("Sec-WebSocket-Protocol", subprotocol) }
        let random = SystemRandomWords()
        socket = WebSocketClient(
            host: url.hostHeader,
            target: url.target,
            headers: headers,
            configuration: .init(
                maximumFrameSize: request.maximumMessageSize,
                maximumMessageSize: request.maximumMessageSize
            ),
            random: { random.next() }
        )
    }

    func start() {
        connection = options.makeConnection(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    /// Sends `bytes` as one message in the request's format.
    func send(_ bytes: [UInt8]) {
        guard socket.state == .open else { return }
        socket.send(format == .text ? .text(bytes) : .binary(bytes))
        writeFrames()
    }

    /// As `send`, the frame held by the connection for `flush()`.
    func hold(_ bytes: [UInt8]) {
        guard socket.state == .open else { return }
        socket.send(format == .text ? .text(bytes) : .binary(bytes))
        writeFrames(holding: true)
    }

    func flush() {
        connection?.flush()
    }

    /// TLS cannot be inserted into a WebSocket (RFC 7395 §3.7: `wss` instead); the transport ends
    /// with `tlsFailed`.
    func startTLS(serverName: String, bufferedBytes: [UInt8]) {
        queue.async { [weak self] in
            self?.end(TransportError(.tlsFailed, "TLS cannot be started inside a WebSocket; use a wss:// URL"))
        }
    }

    /// Sends the closing handshake and closes; no event follows.
    func close() {
        onEvent = nil
        if socket.state == .open { socket.close() }
        writeFrames()
        connection?.close()
        connection = nil
    }

    var unsentByteCount: Int { connection?.unsentByteCount ?? 0 }

    var tlsVersion: String? { connection?.tlsVersion }
    var channelBindings: TLSChannelBindings { connection?.channelBindings ?? .none }

    private func writeFrames(holding: Bool = false) {
        let output = socket.takeOutput()
        guard !output.isEmpty else { return }
        if holding { connection?.hold(output) } else { connection?.send(output) }
    }

    /// Reports the end (the last event): what is queued (a Close) goes out, the connection closes.
    private func end(_ error: TransportError?) {
        let report = onEvent
        onEvent = nil
        writeFrames()
        connection?.close()
        connection = nil
        report?(.closed(error))
    }

    private func event(_ event: TransportEvent) {
        switch event {
        case .connected:
            connection?.send(socket.openingHandshake())
        case .received(let bytes):
            received(bytes)
        case .closed(let error):
            if let error, error.kind == .tlsFailed || error.kind == .certificateRefused {
                end(error)
            } else if socket.state == .connecting || socket.state == .idle {
                end(TransportError(.connectionFailed, error?.message ?? "closed during the WebSocket upgrade"))
            } else {
                end(error)
            }
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
                    if let subprotocol {
                        let chosen = socket.handshakeResponse?.headers["Sec-WebSocket-Protocol"]
                        guard chosen == subprotocol else {
                            return end(
                                TransportError(
                                    .protocolViolation,
                                    "the server did not accept the WebSocket subprotocol '\(subprotocol)'"
                                        + (chosen.map { " (it chose '\($0)')" } ?? "")
                                )
                            )
                        }
                    }
                    onEvent?(.connected)
                case .message(.text(let payload)):
                    guard format == .text || acceptsEitherFormat else {
                        return end(
                            TransportError(
                                .protocolViolation,
                                "the server sent a text WebSocket message; binary expected"
                            )
                        )
                    }
                    onEvent?(.received(payload))
                case .message(.binary(let payload)):
                    guard format == .binary || acceptsEitherFormat else {
                        let which = subprotocol.map { "'\($0)'" } ?? "this protocol"
                        return end(
                            TransportError(
                                .protocolViolation,
                                "the server sent a binary WebSocket message; \(which) uses text"
                            )
                        )
                    }
                    onEvent?(.received(payload))
                case .pong:
                    break
                case .closed(let code, let reason):
                    let normal = code == nil || code == 1000
                    return end(
                        normal
                            ? nil
                            : TransportError(
                                .connectionLost,
                                "closed with code \(code!)\(reason.isEmpty ? "" : ": \(reason)")"
                            )
                    )
                }
                guard onEvent != nil else { return }
            }
            writeFrames()  // pongs
        } catch {
            if let status = socket.handshakeResponse?.status, status != 101 {
                return end(TransportError(status == 401 ? .unauthorized : .rejected, error.message))
            }
            end(TransportError(.protocolViolation, error.message))
        }
    }
}

extension HTTPHeaders {
    /// `headers` sorted by name (so that requests are reproducible), then the driver's
    /// `User-Agent`.
    init(sortedFrom headers: [String: String], userAgent: String) {
        self.init()
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { add(name, value) }
        add("User-Agent", userAgent)
    }
}
