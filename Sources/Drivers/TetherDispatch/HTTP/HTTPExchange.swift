package import Dispatch
@_spi(TetherInternal) package import TetherCore
import TetherHTTP

/// The driver's HTTP/1.1 client, one request on a connection of its own (TLS for https;
/// `Connection: close`), its response read as it arrives: the head, the body in pieces (chunked
/// framing removed), the end. SignalR's negotiate request and the HTTP transports' requests that
/// hold a connection (the event stream, long polling's `DELETE`). Its connection comes from the
/// options' transport factory. Reports on the runner's queue; after `cancel()`, a failure or the
/// end, nothing more.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue`.
package final class HTTPExchange: @unchecked Sendable {
    /// What the exchange reports.
    package enum Event {
        case started(status: Int, contentType: String?)
        case body([UInt8])
        case ended
        /// No (complete) response: the connection failed (`connectionFailed`, `connectionLost`,
        /// `tlsFailed`, `certificateRefused`), the response could not be read
        /// (`protocolViolation`), or the exchange's own deadline passed (`timedOut`).
        case failed(TransportError)
    }

    private var connection: (any Transport)?
    package var tlsVersion: String? { connection?.tlsVersion }
    private var parser: HTTPResponseParser
    private var onEvent: ((Event) -> Void)?
    private let request: HTTPRequest
    private var started = false

    /// Starts `method` to `url`; `timeout` (if any) bounds the whole exchange; `maximumBodySize`
    /// bounds the body not yet handed over (each read's bytes are handed over at once).
    package init(
        method: String,
        url: ServerURL,
        headers: [String: String],
        body: [UInt8] = [],
        queue: DispatchQueue,
        options: ConnectionOptions,
        timeout: Duration? = nil,
        maximumBodySize: Int = 4 << 20,
        onEvent: @escaping (Event) -> Void
    ) {
        var fields = HTTPHeaders(sortedFrom: headers, userAgent: options.userAgent)
        fields.add("Connection", "close")  // one request per connection
        request = HTTPRequest(method: method, target: url.target, host: url.hostHeader, headers: fields, body: body)
        parser = HTTPResponseParser(configuration: .init(maximumBodySize: maximumBodySize), requestMethod: method)
        self.onEvent = onEvent
        connection = options.makeConnection(to: url, queue: queue) { [weak self] event in
            self?.event(event)
        }
        connection?.start()
        if let timeout {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(timeout.totalNanoseconds))) { [weak self] in
                self?.finish(.failed(TransportError(.timedOut, "no response within \(timeout)")))
            }
        }
    }

    /// Abandons the request (no event follows).
    package func cancel() {
        onEvent = nil
        connection?.close()
        connection = nil
    }

    private func event(_ event: TransportEvent) {
        switch event {
        case .connected:
            connection?.send(request.serialize())
        case .received(let bytes):
            parser.append(bytes)
            do throws(HTTPError) {
                try deliverResponse()
            } catch {
                finish(.failed(TransportError(.protocolViolation, error.message)))
            }
        case .closed(let failure) where failure?.kind == .certificateRefused || failure?.kind == .tlsFailed:
            finish(.failed(failure!))
        case .closed(let failure):
            do throws(HTTPError) {
                let rest = try parser.endOfInput()
                if !started {
                    deliver(.started(status: rest.head.status, contentType: rest.head.headers["Content-Type"]))
                }
                if !rest.body.isEmpty { deliver(.body(rest.body)) }
                finish(.ended)
            } catch {
                // A response cut short by a failed connection is reported as that failure.
                finish(.failed(failure ?? TransportError(.connectionLost, error.message)))
            }
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
