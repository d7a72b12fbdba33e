import Dispatch
@_spi(TetherInternal) import TetherCore
import TetherDispatch
import TetherSignalR
import TetherWebSocket

/// One negotiate request: a connection (TLS for https), the POST, the response parsed
/// incrementally, then closed. Reports once, on the runner's queue. It has no deadline of its own:
/// the machine's `connectTimeout` abandons it (`closeTransport` of its generation cancels it).
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class NegotiateRequest: @unchecked Sendable {
    enum Outcome {
        case response(status: Int, body: [UInt8])
        case failed(String)
    }

    private var connection: (any ByteTransport)?
    private var parser = HTTPResponseParser()
    private var onOutcome: ((Outcome) -> Void)?
    private let request: HTTPRequest

    init(
        url: HubURL,
        headers: [String: String],
        queue: DispatchQueue,
        options: HubConnection.Options,
        onOutcome: @escaping (Outcome) -> Void
    ) {
        var fields = HTTPHeaders(hub: headers)
        fields.add("Connection", "close")  // one request per connection
        request = HTTPRequest(method: "POST", target: url.target, host: url.hostHeader, headers: fields)
        self.onOutcome = onOutcome
        connection = options.makeTransport(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    /// Abandons the request (no outcome follows).
    func cancel() {
        onOutcome = nil
        connection?.close()
        connection = nil
    }

    private func event(_ event: ByteTransportEvent) {
        switch event {
        case .connected:
            connection?.send(request.serialize())
        case .received(let bytes):
            parser.append(bytes)
            do throws(HTTPError) {
                if let response = try parser.response() {
                    finish(.response(status: response.head.status, body: response.body))
                }
            } catch {
                finish(.failed(error.message))
            }
        case .closed(let reason):
            do throws(HTTPError) {
                let response = try parser.endOfInput()
                finish(.response(status: response.head.status, body: response.body))
            } catch {
                // A response cut short by a failed connection is reported as that failure.
                finish(.failed(reason.map { "the connection failed: \($0)" } ?? error.message))
            }
        case .tlsFailed(let reason):
            finish(.failed("TLS failed: \(reason)"))
        case .tlsEstablished, .drained:
            break
        }
    }

    private func finish(_ outcome: Outcome) {
        guard let report = onOutcome else { return }
        onOutcome = nil
        connection?.close()
        connection = nil
        report(outcome)
    }
}

/// The WebSocket of one transport generation: a connection (TLS for wss), the RFC 6455 client
/// over it, messages in and out. Reports on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class WebSocketTransport: @unchecked Sendable {
    enum Event {
        case opened
        case message([UInt8])
        /// Closed: nil for a normal close (1000, or none given), else what went wrong.
        case closed(String?)
    }

    private var connection: (any ByteTransport)?
    private var socket: WebSocketClient
    private var onEvent: ((Event) -> Void)?

    init(
        url: HubURL,
        headers: [String: String],
        queue: DispatchQueue,
        options: HubConnection.Options,
        maximumMessageSize: Int,
        onEvent: @escaping (Event) -> Void
    ) {
        socket = WebSocketClient(
            host: url.hostHeader,
            target: url.target,
            headers: HTTPHeaders(hub: headers),
            configuration: .init(
                maximumFrameSize: maximumMessageSize,
                maximumMessageSize: maximumMessageSize
            )
        )
        self.onEvent = onEvent
        connection = options.makeTransport(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    /// Sends one message in `format`'s frame type.
    func send(_ bytes: [UInt8], format: TransferFormat) {
        guard socket.state == .open else { return }
        socket.send(format == .text ? .text(bytes) : .binary(bytes))
        flush()
    }

    /// Starts the closing handshake and closes (no event follows).
    func close() {
        onEvent = nil
        socket.close()
        flush()
        connection?.close()
        connection = nil
    }

    private func flush() {
        let output = socket.takeOutput()
        if !output.isEmpty { connection?.send(output) }
    }

    private func deliver(_ event: Event) {
        onEvent?(event)
    }

    private func end(_ error: String?) {
        let report = onEvent
        onEvent = nil
        flush()
        connection?.close()
        connection = nil
        report?(.closed(error))
    }

    private func event(_ event: ByteTransportEvent) {
        switch event {
        case .connected:
            connection?.send(socket.openingHandshake())
        case .received(let bytes):
            socket.receive(bytes)
            do throws(WebSocketError) {
                while let event = try socket.nextEvent() {
                    switch event {
                    case .opened: deliver(.opened)
                    case .message(.text(let payload)), .message(.binary(let payload)): deliver(.message(payload))
                    case .pong: break
                    case .closed(let code, let reason):
                        let normal = code == nil || code == 1000
                        return end(normal ? nil : "closed with code \(code!)\(reason.isEmpty ? "" : ": \(reason)")")
                    }
                    guard onEvent != nil else { return }
                }
                flush()  // pongs
            } catch {
                end(error.message)
            }
        case .closed(let error):
            end(error ?? "the connection closed")
        case .tlsFailed(let reason):
            end("TLS failed: \(reason)")
        case .tlsEstablished, .drained:
            break
        }
    }
}

extension HTTPHeaders {
    /// The machine's request headers (sorted by name, so requests are reproducible) and the
    /// driver's `User-Agent`.
    init(hub headers: [String: String]) {
        self.init()
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { add(name, value) }
        add("User-Agent", HubConnection.userAgent)
    }
}

extension ConnectionOptions {
    /// A byte transport to a hub URL's host: TLS from the first byte for https and wss.
    func makeTransport(
        to url: HubURL,
        queue: DispatchQueue,
        onEvent: @escaping (ByteTransportEvent) -> Void
    ) -> any ByteTransport {
        makeTransport(
            to: url.endpoint,
            directTLSServerName: url.isSecure ? url.host : nil,
            queue: queue,
            onEvent: onEvent
        )
    }
}
