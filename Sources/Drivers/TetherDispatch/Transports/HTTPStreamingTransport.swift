import Dispatch
import TetherCore
import TetherHTTP

/// Server-Sent Events or long polling for one generation: `HTTPTransportMachine`'s requests made
/// with the driver's HTTP/1.1 client. The event stream (and long polling's `DELETE`) each hold a
/// connection of their own (`HTTPExchange`); the polls and the sends each go on a keep-alive lane
/// (`HTTPLane`), so that a message over these transports costs no TCP (or TLS) handshake. Reports
/// on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
final class HTTPStreamingTransport: Transport, @unchecked Sendable {
    /// A poll or send with no answer within this long is sent again (polls) or fails (sends): the
    /// official SignalR clients' HTTP timeout, above ASP.NET Core's 90 s poll timeout.
    static let requestTimeout = Duration.seconds(100)
    /// The `DELETE` on close gets this long.
    static let closeTimeout = Duration.seconds(5)

    private var machine: HTTPTransportMachine
    private var exchanges: [Int: HTTPExchange] = [:]
    private lazy var sendLane = HTTPLane(url: url, queue: queue, options: options, maximumBodySize: maximumMessageSize)
    private lazy var pollLane = HTTPLane(url: url, queue: queue, options: options, maximumBodySize: maximumMessageSize)
    /// The lane of each request out on one.
    private var laneRequests: [Int: HTTPLane] = [:]
    /// The last send's request.
    private var sendRequest: Int?
    private var onEvent: ((TransportEvent) -> Void)?
    private let queue: DispatchQueue
    private let options: ConnectionOptions
    private let url: ServerURL
    private let maximumMessageSize: Int
    /// Keeps the transport alive after `close()` until its `DELETE` is answered.
    private var closing: HTTPStreamingTransport?

    /// A transport of `kind` to `url` with the request's headers, format and message size limit.
    init(
        _ kind: HTTPTransportMachine.Kind,
        url: ServerURL,
        request: TransportRequest,
        options: ConnectionOptions,
        queue: DispatchQueue,
        onEvent: @escaping (TransportEvent) -> Void
    ) {
        machine = HTTPTransportMachine(
            kind: kind,
            url: url.description,
            headers: request.headers,
            format: kind == .serverSentEvents ? .text : request.messageFormat,
            maximumEventSize: request.maximumMessageSize
        )
        self.url = url
        self.queue = queue
        self.options = options
        maximumMessageSize = request.maximumMessageSize
        self.onEvent = onEvent
    }

    /// The TLS version of the connection that carries the server's messages (the event stream,
    /// or a lane with a request out: the polls, the sends; all go to the same server). The lanes
    /// are not made for the asking.
    var tlsVersion: String? {
        exchanges.values.lazy.compactMap(\.tlsVersion).first
            ?? laneRequests.values.lazy.compactMap(\.tlsVersion).first
    }

    var unsentByteCount: Int { machine.unsentByteCount }

    func start() {
        queue.async { [weak self] in
            guard let self else { return }
            machine.open()
            drain()
        }
    }

    func send(_ bytes: [UInt8]) {
        machine.send(bytes)
        drain()
    }

    /// TLS cannot be inserted into an HTTP transport (an `https://` URL instead): it ends with
    /// `tlsFailed`.
    func startTLS(serverName: String, bufferedBytes: [UInt8]) {
        queue.async { [weak self] in
            self?.end(
                .closed(TransportError(.tlsFailed, "TLS cannot be started inside an HTTP transport; use https://"))
            )
        }
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
                onEvent?(.connected)
            case .received(let bytes):
                onEvent?(.received(bytes))
            case .closed(let error):
                end(.closed(error))
            }
        }
    }

    /// Ends the transport: every request abandoned, `event` reported (the last one).
    private func end(_ event: TransportEvent) {
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
        case .failed(let error) where error.kind == .certificateRefused:
            // Final: the transport ends here, whatever its machine would do next.
            return end(.closed(error))
        case .failed(let error):
            exchanges.removeValue(forKey: id)
            laneRequests.removeValue(forKey: id)
            let failure: HTTPTransportMachine.RequestFailure =
                switch error.kind {
                case .timedOut: .timedOut
                case .tlsFailed: .tlsFailed(error.message)
                default: .failed(error.message)
                }
            machine.requestFailed(id: id, failure)
        }
        drain()
        // A send answered with nothing left to send: commands waiting for the network may go.
        if id == sendRequest, case .ended = event, machine.unsentByteCount == 0 {
            sendRequest = nil
            onEvent?(.drained)
        }
    }
}
