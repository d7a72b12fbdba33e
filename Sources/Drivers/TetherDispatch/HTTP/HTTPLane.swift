package import Dispatch
@_spi(TetherInternal) package import TetherCore
import TetherHTTP

/// A persistent HTTP/1.1 connection carrying one request after another (keep-alive): the long
/// polls of an HTTP transport on one, its sends on another, so that a call over the HTTP transports
/// costs no TCP (or TLS) handshake. A response that asks to close (`Connection: close`, a body
/// up to the end of the connection) closes it, and the next request opens a new one. A request
/// on a reused connection that the server closed before answering anything (it may close an idle
/// connection just as the request goes out) is sent once more on a new connection. Reports like
/// `HTTPExchange`, on the runner's queue.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
package final class HTTPLane: @unchecked Sendable {
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

    private let url: ServerURL
    private let queue: DispatchQueue
    private let options: ConnectionOptions
    private let maximumBodySize: Int
    private var connection: (any Transport)?
    package var tlsVersion: String? { connection?.tlsVersion }
    private var isConnected = false
    /// Whether the current request went out on a connection that carried one before.
    private var isReused = false
    private var parser: HTTPResponseParser
    private var current: Current?
    /// Tells a deadline of an earlier request from the current one's.
    private var deadlineToken = 0

    package init(url: ServerURL, queue: DispatchQueue, options: ConnectionOptions, maximumBodySize: Int) {
        self.url = url
        self.queue = queue
        self.options = options
        self.maximumBodySize = maximumBodySize
        parser = HTTPResponseParser(configuration: .init(maximumBodySize: maximumBodySize))
    }

    /// Whether a request is out.
    package var isBusy: Bool { current != nil }

    /// Sends a request (none may be out); its answer is reported to `onEvent`.
    package func start(
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
            headers: HTTPHeaders(sortedFrom: headers, userAgent: options.userAgent),
            body: body
        )
        current = Current(id: id, request: request, timeout: timeout, onEvent: onEvent)
        send()
    }

    /// Abandons the request that is out (no event follows); the connection, which may still
    /// bring its answer, is closed.
    package func cancel() {
        current = nil
        dropConnection()
    }

    /// Closes the lane.
    package func close() {
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
                finish(.failed(TransportError(.timedOut, "no response within \(timeout)")), keepConnection: false)
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
        connection = options.makeConnection(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
    }

    private func dropConnection() {
        connection?.close()
        connection = nil
        isConnected = false
    }

    private func event(_ event: TransportEvent) {
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
                finish(.failed(TransportError(.protocolViolation, error.message)), keepConnection: false)
            }
        case .closed(let failure) where failure?.kind == .certificateRefused || failure?.kind == .tlsFailed:
            isConnected = false
            connection = nil
            finish(.failed(failure!), keepConnection: false)
        case .closed(let failure):
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
                finish(.failed(failure ?? TransportError(.connectionLost, error.message)), keepConnection: false)
            }
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
