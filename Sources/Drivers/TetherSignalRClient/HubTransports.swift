import Dispatch
@_spi(TetherInternal) import TetherCore
import TetherDispatch
import TetherHTTP
import TetherSignalR

/// One HTTP request on a connection of its own (TLS for https; `Connection: close`), its
/// response read as it arrives: the head, the body in pieces (chunked framing removed), the end.
/// Negotiate and the HTTP transports' requests. Reports on the runner's queue; after `cancel()`,
/// a failure or the end, nothing more.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class HTTPExchange: @unchecked Sendable {
    enum Event {
        case started(status: Int, contentType: String?)
        case body([UInt8])
        case ended
        /// No (complete) response; `timedOut` when the exchange's own deadline passed.
        case failed(String, timedOut: Bool)
        /// The app's trust settings refused the server's certificate.
        case certificateRefused(String)
    }

    private var connection: (any ByteTransport)?
    var tlsVersion: String? { connection?.tlsVersion }
    private var parser: HTTPResponseParser
    private var onEvent: ((Event) -> Void)?
    private let request: HTTPRequest
    private var started = false

    /// Starts `method` to `url`; `timeout` (if any) bounds the whole exchange; `maximumBodySize`
    /// bounds the body not yet handed over (each read's bytes are handed over at once).
    init(
        method: String,
        url: HubURL,
        headers: [String: String],
        body: [UInt8] = [],
        queue: DispatchQueue,
        options: HubConnection.Options,
        timeout: Duration? = nil,
        maximumBodySize: Int = 4 << 20,
        onEvent: @escaping (Event) -> Void
    ) {
        var fields = HTTPHeaders(hub: headers)
        fields.add("Connection", "close")  // one request per connection
        request = HTTPRequest(method: method, target: url.target, host: url.hostHeader, headers: fields, body: body)
        parser = HTTPResponseParser(configuration: .init(maximumBodySize: maximumBodySize), requestMethod: method)
        self.onEvent = onEvent
        connection = options.makeTransport(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
        if let timeout {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(timeout.totalNanoseconds))) { [weak self] in
                self?.finish(.failed("no response within \(timeout)", timedOut: true))
            }
        }
    }

    /// Abandons the request (no event follows).
    func cancel() {
        onEvent = nil
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
                try deliverResponse()
            } catch {
                finish(.failed(error.message, timedOut: false))
            }
        case .closed(let reason):
            do throws(HTTPError) {
                let rest = try parser.endOfInput()
                if !started {
                    deliver(.started(status: rest.head.status, contentType: rest.head.headers["Content-Type"]))
                }
                if !rest.body.isEmpty { deliver(.body(rest.body)) }
                finish(.ended)
            } catch {
                // A response cut short by a failed connection is reported as that failure.
                finish(.failed(reason.map { "the connection failed: \($0)" } ?? error.message, timedOut: false))
            }
        case .tlsFailed(let reason):
            finish(.failed("TLS failed: \(reason)", timedOut: false))
        case .certificateRefused(let reason):
            finish(.certificateRefused(reason))
        case .tlsEstablished, .drained:
            break
        }
    }

    private func deliverResponse() throws(HTTPError) {
        if !started {
            guard let head = try parser.readHead() else { return }
            started = true
            deliver(.started(status: head.status, contentType: head.headers["Content-Type"]))
        }
        let body = try parser.takeBody()
        if !body.isEmpty { deliver(.body(body)) }
        if parser.isComplete { finish(.ended) }
    }

    private func deliver(_ event: Event) {
        onEvent?(event)
    }

    private func finish(_ event: Event) {
        guard let report = onEvent else { return }
        onEvent = nil
        connection?.close()
        connection = nil
        report(event)
    }
}

/// A persistent HTTP/1.1 connection carrying one request after another (keep-alive): the long
/// polls of one transport on one, its sends on another, so that a call over the HTTP transports
/// costs no TCP (or TLS) handshake. A response that asks to close (`Connection: close`, a body
/// up to the end of the connection) closes it, and the next request opens a new one. A request
/// on a reused connection that the server closed before answering anything (it may close an idle
/// connection just as the request goes out) is sent once more on a new connection. Reports like
/// `HTTPExchange`, on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class HTTPLane: @unchecked Sendable {
    private struct Current {
        var id: Int
        var request: HTTPRequest
        var timeout: Duration?
        var onEvent: (HTTPExchange.Event) -> Void
        /// Whether any byte of the response came.
        var answered = false
        var started = false
        var retried = false
    }

    private let url: HubURL
    private let queue: DispatchQueue
    private let options: HubConnection.Options
    private let maximumBodySize: Int
    private var connection: (any ByteTransport)?
    var tlsVersion: String? { connection?.tlsVersion }
    private var isConnected = false
    /// Whether the current request went out on a connection that carried one before.
    private var isReused = false
    private var parser: HTTPResponseParser
    private var current: Current?
    /// Tells a deadline of an earlier request from the current one's.
    private var deadlineToken = 0

    init(url: HubURL, queue: DispatchQueue, options: HubConnection.Options, maximumBodySize: Int) {
        self.url = url
        self.queue = queue
        self.options = options
        self.maximumBodySize = maximumBodySize
        parser = HTTPResponseParser(configuration: .init(maximumBodySize: maximumBodySize))
    }

    /// Whether a request is out.
    var isBusy: Bool { current != nil }

    /// Sends a request (none may be out); its answer is reported to `onEvent`.
    func start(
        id: Int,
        method: String,
        headers: [String: String],
        body: [UInt8],
        timeout: Duration?,
        onEvent: @escaping (HTTPExchange.Event) -> Void
    ) {
        precondition(current == nil, "a request is already out on this lane")
        let request = HTTPRequest(
            method: method,
            target: url.target,
            host: url.hostHeader,
            headers: HTTPHeaders(hub: headers),
            body: body
        )
        current = Current(id: id, request: request, timeout: timeout, onEvent: onEvent)
        send()
    }

    /// Abandons the request that is out (no event follows); the connection, which may still
    /// bring its answer, is closed.
    func cancel() {
        current = nil
        dropConnection()
    }

    /// Closes the lane.
    func close() {
        cancel()
    }

    private func send() {
        guard var request = current else { return }
        parser = HTTPResponseParser(
            configuration: .init(maximumBodySize: maximumBodySize),
            requestMethod: request.request.method
        )
        deadlineToken += 1
        if let timeout = request.timeout {
            let token = deadlineToken
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(timeout.totalNanoseconds))) { [weak self] in
                guard let self, deadlineToken == token, current != nil else { return }
                finish(.failed("no response within \(timeout)", timedOut: true), keepConnection: false)
            }
        }
        request.answered = false
        request.started = false
        current = request
        if let connection, isConnected {
            isReused = true
            connection.send(request.request.serialize())
            return
        }
        isReused = false
        dropConnection()
        connection = options.makeTransport(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    private func dropConnection() {
        connection?.close()
        connection = nil
        isConnected = false
    }

    private func event(_ event: ByteTransportEvent) {
        switch event {
        case .connected:
            isConnected = true
            if let current { connection?.send(current.request.serialize()) }
        case .received(let bytes):
            guard current != nil else { return dropConnection() }  // nothing was asked
            current?.answered = true
            parser.append(bytes)
            do throws(HTTPError) {
                try deliverResponse()
            } catch {
                finish(.failed(error.message, timedOut: false), keepConnection: false)
            }
        case .closed(let reason):
            isConnected = false
            connection = nil
            guard let request = current else { return }
            if !request.answered && isReused && !request.retried {
                // The server closed the idle connection as the request went out: once more, anew.
                current?.retried = true
                return send()
            }
            do throws(HTTPError) {
                let rest = try parser.endOfInput()
                if !request.started {
                    current?.started = true
                    request.onEvent(.started(status: rest.head.status, contentType: rest.head.headers["Content-Type"]))
                }
                if !rest.body.isEmpty { current?.onEvent(.body(rest.body)) }
                finish(.ended, keepConnection: false)
            } catch {
                finish(
                    .failed(reason.map { "the connection failed: \($0)" } ?? error.message, timedOut: false),
                    keepConnection: false
                )
            }
        case .tlsFailed(let reason):
            finish(.failed("TLS failed: \(reason)", timedOut: false), keepConnection: false)
        case .certificateRefused(let reason):
            finish(.certificateRefused(reason), keepConnection: false)
        case .tlsEstablished, .drained:
            break
        }
    }

    private func deliverResponse() throws(HTTPError) {
        guard let request = current else { return }
        if !request.started {
            guard let head = try parser.readHead() else { return }
            current?.started = true
            request.onEvent(.started(status: head.status, contentType: head.headers["Content-Type"]))
            guard current?.id == request.id else { return }  // canceled meanwhile
        }
        let body = try parser.takeBody()
        if !body.isEmpty {
            request.onEvent(.body(body))
            guard current?.id == request.id else { return }
        }
        guard parser.isComplete, let head = try parser.readHead() else { return }
        let keep = !head.headers.contains("Connection", token: "close") && parser.remainder.isEmpty
        finish(.ended, keepConnection: keep)
    }

    private func finish(_ event: HTTPExchange.Event, keepConnection: Bool) {
        guard let request = current else { return }
        current = nil
        deadlineToken += 1
        if !keepConnection { dropConnection() }
        request.onEvent(event)
    }
}

/// A SignalR transport of one generation as the runner drives it: the WebSocket, or an HTTP
/// transport.
protocol HubTransportConnection: AnyObject {
    /// The TLS version of its connection (nil without TLS).
    var tlsVersion: String? { get }
    /// The bytes sent that the network (or, over HTTP, the server) has not taken yet.
    var unsentByteCount: Int { get }
    /// Sends one message in `format`.
    func send(_ bytes: [UInt8], format: TransferFormat)
    /// Closes (no event follows).
    func close()
}

/// What a transport reports to the runner.
enum HubTransportEvent {
    case opened
    case message([UInt8])
    /// Closed: nil for a normal close, else what went wrong.
    case closed(String?)
    /// Opening it (or a request of it) was answered 401.
    case unauthorized
    /// The app's trust settings refused the server's certificate.
    case certificateRefused(String)
    /// Everything sent was taken (after `unsentByteCount` had grown).
    case drained
}

/// Server-Sent Events or long polling for one generation: `HubHTTPTransportMachine`'s requests
/// made as `HTTPExchange`s. Reports on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class HTTPHubTransport: HubTransportConnection, @unchecked Sendable {
    /// A poll or send with no answer within this long is sent again (polls) or fails (sends):
    /// the official clients' HTTP timeout, above ASP.NET Core's 90 s poll timeout.
    static let requestTimeout = Duration.seconds(100)
    /// The `DELETE` on close gets this long.
    static let closeTimeout = Duration.seconds(5)

    private var machine: HubHTTPTransportMachine
    private var exchanges: [Int: HTTPExchange] = [:]
    private lazy var sendLane = HTTPLane(url: url, queue: queue, options: options, maximumBodySize: maximumMessageSize)
    private lazy var pollLane = HTTPLane(url: url, queue: queue, options: options, maximumBodySize: maximumMessageSize)
    /// The lane of each request out on one.
    private var laneRequests: [Int: HTTPLane] = [:]
    /// The last send's request.
    private var sendRequest: Int?
    /// The TLS version of the connection that carries the server's messages (the event stream,
    /// or a lane with a request out: the polls, the sends; all go to the same server). The lanes
    /// are not made for the asking.
    var tlsVersion: String? {
        exchanges.values.lazy.compactMap(\.tlsVersion).first
            ?? laneRequests.values.lazy.compactMap(\.tlsVersion).first
    }
    private var onEvent: ((HubTransportEvent) -> Void)?
    private let queue: DispatchQueue
    private let options: HubConnection.Options
    private let url: HubURL
    private let maximumMessageSize: Int
    /// Keeps the transport alive after `close()` until its `DELETE` is answered.
    private var closing: HTTPHubTransport?

    init(
        _ kind: HubHTTPTransportMachine.Kind,
        url: HubURL,
        urlText: String,
        headers: [String: String],
        format: TransferFormat,
        queue: DispatchQueue,
        options: HubConnection.Options,
        maximumMessageSize: Int,
        onEvent: @escaping (HubTransportEvent) -> Void
    ) {
        machine = HubHTTPTransportMachine(
            kind: kind,
            url: urlText,
            headers: headers,
            format: format,
            maximumEventSize: maximumMessageSize
        )
        self.url = url
        self.queue = queue
        self.options = options
        self.maximumMessageSize = maximumMessageSize
        self.onEvent = onEvent
        queue.async { [weak self] in
            guard let self else { return }
            machine.open()
            drain()
        }
    }

    var unsentByteCount: Int { machine.unsentByteCount }

    func send(_ bytes: [UInt8], format: TransferFormat) {
        machine.send(bytes)
        drain()
    }

    func close() {
        onEvent = nil
        closing = self
        machine.stop()
        drain()
    }

    private func drain() {
        while let action = machine.pollAction() {
            switch action {
            case .request(let request) where request.purpose == .send || request.purpose == .poll:
                // Sends and polls each on a keep-alive lane of their own (one at a time each).
                let lane = request.purpose == .send ? sendLane : pollLane
                laneRequests[request.id] = lane
                if request.purpose == .send { sendRequest = request.id }
                lane.start(
                    id: request.id,
                    method: request.method.rawValue,
                    headers: request.headers,
                    body: request.body,
                    timeout: Self.requestTimeout
                ) { [weak self] event in
                    self?.exchangeEvent(event, id: request.id)
                }
            case .request(let request):
                let purpose = request.purpose
                exchanges[request.id] = HTTPExchange(
                    method: request.method.rawValue,
                    url: url,
                    headers: request.headers,
                    body: request.body,
                    queue: queue,
                    options: options,
                    timeout: purpose == .eventStream
                        ? nil : purpose == .close ? Self.closeTimeout : Self.requestTimeout,
                    maximumBodySize: maximumMessageSize
                ) { [weak self] event in
                    self?.exchangeEvent(event, id: request.id)
                }
            case .cancelRequest(let id):
                exchanges.removeValue(forKey: id)?.cancel()
                laneRequests.removeValue(forKey: id)?.cancel()
            case .opened:
                onEvent?(.opened)
            case .received(let bytes):
                onEvent?(.message(bytes))
            case .closed(let error):
                end(error?.kind == .unauthorized ? .unauthorized : .closed(error?.message))
            }
        }
    }

    /// Ends the transport: every request abandoned, `event` reported (the last one).
    private func end(_ event: HubTransportEvent) {
        for exchange in exchanges.values { exchange.cancel() }
        exchanges.removeAll()
        laneRequests.removeAll()
        sendLane.close()
        pollLane.close()
        let report = onEvent
        onEvent = nil
        closing = nil
        report?(event)
    }

    private func exchangeEvent(_ event: HTTPExchange.Event, id: Int) {
        switch event {
        case .started(let status, let contentType):
            machine.responseStarted(id: id, status: status, contentType: contentType)
        case .body(let bytes):
            machine.responseBody(id: id, bytes)
        case .ended:
            exchanges.removeValue(forKey: id)
            laneRequests.removeValue(forKey: id)
            machine.responseEnded(id: id)
        case .failed(let reason, let timedOut):
            exchanges.removeValue(forKey: id)
            laneRequests.removeValue(forKey: id)
            machine.requestFailed(id: id, timedOut ? .timedOut : .failed(reason))
        case .certificateRefused(let reason):
            // Final: the transport ends here, whatever its machine would do next.
            return end(.certificateRefused(reason))
        }
        drain()
        // A send answered with nothing left to send: commands waiting for the network may go.
        if id == sendRequest, case .ended = event, machine.unsentByteCount == 0 {
            sendRequest = nil
            onEvent?(.drained)
        }
    }
}

/// The WebSocket of one transport generation: a connection (TLS for wss), the RFC 6455 client
/// over it, messages in and out. Reports on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class WebSocketTransport: HubTransportConnection, @unchecked Sendable {
    typealias Event = HubTransportEvent

    private var connection: (any ByteTransport)?
    var tlsVersion: String? { connection?.tlsVersion }
    var unsentByteCount: Int { connection?.pendingWriteCount ?? 0 }
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

    private func unauthorized() {
        let report = onEvent
        onEvent = nil
        connection?.close()
        connection = nil
        report?(.unauthorized)
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
                if socket.handshakeResponse?.status == 401 { return unauthorized() }
                end(error.message)
            }
        case .closed(let error):
            end(error ?? "the connection closed")
        case .tlsFailed(let reason):
            end("TLS failed: \(reason)")
        case .certificateRefused(let reason):
            let report = onEvent
            onEvent = nil
            connection?.close()
            connection = nil
            report?(.certificateRefused(reason))
        case .drained:
            deliver(.drained)
        case .tlsEstablished:
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

/// A hub's URL (negotiate, WebSocket, event stream, polls).
typealias HubURL = ServerURL
