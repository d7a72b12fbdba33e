@_spi(TetherInternal) public import TetherCore

/// Message transports over plain HTTP/1.1 requests, sans-IO: Server-Sent Events and long
/// polling as ASP.NET Core defines them (its TransportProtocols.md; SignalR runs over them). It
/// turns "open", "send these frames" and "stop" into HTTP requests and the responses into
/// received frames and a close (decisions in `Specs/http-transports.md`).
///
/// - Server-Sent Events: one `GET` with `Accept: text/event-stream` carries everything the server
///   sends (each event's data is one or more frames; text only); the transport is open once that
///   response starts with 200.
/// - Long polling: `GET` polls, each answered with the frames queued on the server (200, maybe
///   empty: the server's poll timeout; the next poll follows at once), 204 when the server closed
///   the connection; a poll that times out on the client is sent again. The first poll waits for
///   the first send (the handshake) to be answered, which every server accepts and some need
///   (aiosignalr drops a connection whose first request is a poll). `DELETE` on stop.
/// - Sends, on both: `POST`s of the frames queued so far (at most `maximumPostSize` bytes, or
///   one frame), one at a time, so the server sees them in order and never two at once (it
///   answers a concurrent `POST` with 409).
///
/// Requests carry an `id`; answers to a request that is no longer current (a poll canceled by
/// `stop`, any request after the close) are ignored, so a late callback never touches the
/// transport's state.
public struct HTTPTransportMachine: Sendable {
    /// Which HTTP transport.
    public enum Kind: Hashable, Sendable {
        /// Server-Sent Events: one long GET receives, POSTs send.
        case serverSentEvents
        /// Long polling: repeated GETs receive, POSTs send.
        case longPolling
    }

    /// An HTTP request for the runner to make.
    public struct Request: Hashable, Sendable {
        /// The request's method.
        public enum Method: String, Hashable, Sendable {
            /// GET.
            case get = "GET"
            /// POST.
            case post = "POST"
            /// DELETE.
            case delete = "DELETE"
        }

        /// What the request is for.
        public enum Purpose: Hashable, Sendable {
            /// The Server-Sent Events stream: its body arrives in pieces for as long as the
            /// transport lives (no timeout on the whole response).
            case eventStream
            /// A long poll: the server holds it until it has frames (up to its poll timeout).
            case poll
            /// Frames for the server.
            case send
            /// Long polling's `DELETE` on stop.
            case close
        }

        /// Unique within the transport; the answer names it.
        public var id: Int
        /// The request's method.
        public var method: Method
        /// The URL to request.
        public var url: String
        /// The transport's headers (the app's and `Authorization`) and the request's own
        /// (`Accept` for the event stream, `Content-Type` for sends).
        public var headers: [String: String]
        /// The frames of a send; empty otherwise.
        public var body: [UInt8]
        /// What the request is for.
        public var purpose: Purpose
    }

    /// What the runner does next, in order.
    public enum Action: Hashable, Sendable {
        /// Make this request and report its answer by `id`.
        case request(Request)
        /// Abandon the request `id` (its answer, if any comes, is ignored).
        case cancelRequest(id: Int)
        /// The transport can carry frames (the connection machine's `transportConnected`).
        case opened
        /// Frames from the server, as the protocol's parser takes them.
        case received([UInt8])
        /// The transport ended: nil when it was stopped or the server closed it in order (a
        /// poll answered 204, the event stream's end), else why (`unauthorized` for a 401,
        /// `rejected` for another status, `protocolViolation` for a response it cannot read,
        /// `connectionLost` or `timedOut` for a request that failed).
        case closed(TransportError?)
    }

    /// How a request failed without an HTTP answer.
    public enum RequestFailure: Hashable, Sendable {
        /// The client's timeout for the request passed (a poll is then sent again).
        case timedOut
        /// TLS could not be established (or a record was broken); the text says why.
        case tlsFailed(String)
        /// Anything else (refused, reset); the text says what.
        case failed(String)

        var transportErrorKind: TransportError.Kind {
            switch self {
            case .timedOut: .timedOut
            case .tlsFailed: .tlsFailed
            case .failed: .connectionLost
            }
        }
    }

    /// Which transport this is.
    public let kind: Kind
    /// The connect URL (with `id=`), as for the WebSocket transport but with its http(s) scheme.
    public let url: String
    /// The app's headers and `Authorization`, sent with every request.
    public let headers: [String: String]
    /// The hub protocol's message format (text or binary).
    public let format: MessageFormat
    /// The largest `POST` body made of several queued frames (one larger frame goes alone).
    public let maximumPostSize: Int

    private enum Phase: Hashable, Sendable {
        case idle
        /// Server-Sent Events: the stream's response has not started.
        case opening
        case open
        /// Long polling: the `DELETE` is out.
        case closing
        case closed
    }

    private var phase = Phase.idle
    private var nextID = 1
    private var actions = ActionQueue<Action>()
    /// The request answering the server→client direction (the event stream or the current poll).
    private var receiving: Int?
    /// The `POST` in flight.
    private var sending: Int?
    /// The `DELETE` in flight.
    private var closing: Int?
    /// Frames waiting for the `POST` in flight to be answered.
    private var queued = FIFOQueue<[UInt8]>()
    /// The bytes of `queued`, and of the `POST` in flight.
    private var queuedByteCount = 0
    private var sendingByteCount = 0
    /// Long polling: a send has been answered, so polls may start.
    private var firstSendAnswered = false
    private var events: ServerSentEventReader
    private var statusOfReceiving = 0

    /// A transport of `kind` to the connect `url` (http or https, with `id=`).
    public init(
        kind: Kind,
        url: String,
        headers: [String: String] = [:],
        format: MessageFormat,
        maximumPostSize: Int = 64 * 1024,
        maximumEventSize: Int = ServerSentEventReader.defaultMaximumEventSize
    ) {
        precondition(kind == .longPolling || format == .text, "Server-Sent Events carry text only")
        self.kind = kind
        self.url = url
        self.headers = headers
        self.format = format
        self.maximumPostSize = max(1, maximumPostSize)
        self.events = ServerSentEventReader(maximumEventSize: maximumEventSize)
    }

    /// The next action, if any.
    public mutating func pollAction() -> Action? { actions.next() }

    /// Whether the transport has ended.
    public var isClosed: Bool { phase == .closed }

    /// The transport's states, by name (`Specs/http-transports.md` has the transition table).
    public enum StateName: String, Hashable, Sendable, CaseIterable {
        /// Not opened yet.
        case idle
        /// Server-Sent Events: the stream's request is out, its answer has not started.
        case opening
        /// Frames flow (long polling: at once after `open()`).
        case open
        /// Long polling: the `DELETE` is out.
        case closing
        /// Ended.
        case closed
    }

    /// The state the transport is in.
    public var stateName: StateName {
        switch phase {
        case .idle: .idle
        case .opening: .opening
        case .open: .open
        case .closing: .closing
        case .closed: .closed
        }
    }

    /// The bytes sent that the server has not taken yet: the frames queued behind the `POST` in
    /// flight, and that `POST`'s body until it is answered.
    public var unsentByteCount: Int { queuedByteCount + sendingByteCount }

    // MARK: - Commands

    /// Opens the transport: the event stream's request, or (long polling) nothing yet: the
    /// transport is open at once and polls after the first send is answered.
    public mutating func open() {
        guard phase == .idle else { return }
        switch kind {
        case .serverSentEvents:
            phase = .opening
            var headers = headers
            headers["Accept"] = "text/event-stream"
            receiving = request(.get, purpose: .eventStream, headers: headers)
        case .longPolling:
            phase = .open
            actions.append(.opened)
        }
    }

    /// Queues `frames` (one or more whole frames) for the server.
    public mutating func send(_ frames: [UInt8]) {
        guard phase == .open || phase == .opening, !frames.isEmpty else { return }
        queued.append(frames)
        queuedByteCount += frames.count
        if sending == nil, phase == .open { postQueued() }
    }

    /// Stops the transport: the receiving request and any send are canceled; long polling then
    /// sends `DELETE` and is closed when it is answered (or fails), the event stream at once.
    public mutating func stop() {
        switch phase {
        case .idle:
            phase = .closed
            actions.append(.closed(nil))
        case .opening, .open:
            cancelAll()
            switch kind {
            case .serverSentEvents:
                finish(nil)
            case .longPolling:
                phase = .closing
                closing = request(.delete, purpose: .close)
            }
        case .closing, .closed:
            return
        }
    }

    // MARK: - Answers

    /// The answer to request `id` started with `status` (`contentType` its Content-Type).
    public mutating func responseStarted(id: Int, status: Int, contentType: String? = nil) {
        if status == 401, id == receiving || id == sending {
            return fail("The server answered 401 (unauthorized).", kind: .unauthorized)
        }
        if id == receiving {
            statusOfReceiving = status
            switch kind {
            case .serverSentEvents:
                guard phase == .opening else { return }
                guard status == 200 else {
                    return fail("The Server-Sent Events request failed with status \(status).", kind: .rejected)
                }
                guard let contentType, Self.isEventStream(contentType) else {
                    return fail("The Server-Sent Events response is not text/event-stream.", kind: .protocolViolation)
                }
                phase = .open
                actions.append(.opened)
                if sending == nil, !queued.isEmpty { postQueued() }
            case .longPolling:
                switch status {
                case 200, 204: return
                case 404: fail("The long-polling connection is gone (poll answered 404).", kind: .rejected)
                default: fail("A long poll failed with status \(status).", kind: .rejected)
                }
            }
        } else if id == sending {
            guard status == 200 else {
                let detail = status == 404 ? " (the connection is gone)" : ""
                return fail("Sending to the server failed with status \(status)\(detail).", kind: .rejected)
            }
        }
    }

    /// A piece of request `id`'s body.
    public mutating func responseBody(id: Int, _ bytes: [UInt8]) {
        guard id == receiving, !bytes.isEmpty else { return }
        switch kind {
        case .serverSentEvents:
            // The stream's body counts once its head said 200 text/event-stream (a runner that
            // reports a body first is ignored rather than believed).
            guard phase == .open else { return }
            events.append(bytes)
            do {
                while let event = try events.next() {
                    actions.append(.received(event.data))
                }
            } catch {
                fail(error.message, kind: .protocolViolation)
            }
        case .longPolling:
            actions.append(.received(bytes))
        }
    }

    /// Request `id`'s answer is complete.
    public mutating func responseEnded(id: Int) {
        if id == receiving {
            receiving = nil
            switch kind {
            case .serverSentEvents:
                finish(nil)
            case .longPolling:
                if statusOfReceiving == 204 { return finish(nil) }
                poll()
            }
        } else if id == sending {
            sending = nil
            sendingByteCount = 0
            firstSendAnswered = true
            if kind == .longPolling, receiving == nil, phase == .open { poll() }
            if !queued.isEmpty { postQueued() }
        } else if id == closing {
            closing = nil
            finish(nil)
        }
    }

    /// Request `id` failed without a (complete) answer.
    public mutating func requestFailed(id: Int, _ failure: RequestFailure) {
        if id == receiving {
            receiving = nil
            if kind == .longPolling, failure == .timedOut, phase == .open { return poll() }
            fail(
                Self.describe(failure, of: kind == .longPolling ? "A long poll" : "The Server-Sent Events stream"),
                kind: failure.transportErrorKind
            )
        } else if id == sending {
            sending = nil
            sendingByteCount = 0
            fail(Self.describe(failure, of: "Sending to the server"), kind: failure.transportErrorKind)
        } else if id == closing {
            // The DELETE is a courtesy: the transport is closed either way.
            closing = nil
            finish(nil)
        }
    }

    // MARK: - Inside

    private mutating func request(
        _ method: Request.Method,
        purpose: Request.Purpose,
        headers: [String: String]? = nil,
        body: [UInt8] = []
    ) -> Int {
        let id = nextID
        nextID += 1
        actions.append(
            .request(
                Request(
                    id: id,
                    method: method,
                    url: url,
                    headers: headers ?? self.headers,
                    body: body,
                    purpose: purpose
                )
            )
        )
        return id
    }

    private mutating func poll() {
        guard phase == .open, firstSendAnswered, receiving == nil else { return }
        statusOfReceiving = 0
        receiving = request(.get, purpose: .poll)
    }

    /// Posts the queued frames: as many whole ones as fit in `maximumPostSize` (at least one).
    private mutating func postQueued() {
        guard var body = queued.elements.first else { return }
        var taken = 1
        for next in queued.elements.dropFirst() {
            guard body.count + next.count <= maximumPostSize else { break }
            body.append(contentsOf: next)
            taken += 1
        }
        queued.removeFirst(taken)
        queuedByteCount -= body.count
        sendingByteCount = body.count
        var headers = headers
        headers["Content-Type"] = format == .text ? "text/plain; charset=UTF-8" : "application/octet-stream"
        sending = request(.post, purpose: .send, headers: headers, body: body)
    }

    private mutating func cancelAll() {
        for id in [receiving, sending].compactMap({ $0 }) { actions.append(.cancelRequest(id: id)) }
        receiving = nil
        sending = nil
        _ = queued.removeAll()
        queuedByteCount = 0
        sendingByteCount = 0
    }

    private mutating func fail(_ message: String, kind: TransportError.Kind) {
        guard phase != .closed else { return }
        cancelAll()
        if let closing { actions.append(.cancelRequest(id: closing)) }
        closing = nil
        finish(TransportError(kind, message))
    }

    private mutating func finish(_ error: TransportError?) {
        guard phase != .closed else { return }
        cancelAll()
        phase = .closed
        actions.append(.closed(error))
    }

    static func isEventStream(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        let trimmed = mediaType.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }
        return String(trimmed.reversed()).lowercased() == "text/event-stream"
    }

    static func describe(_ failure: RequestFailure, of what: String) -> String {
        switch failure {
        case .timedOut: "\(what) timed out."
        case .tlsFailed(let reason): "\(what) failed: TLS failed: \(reason)"
        case .failed(let reason): "\(what) failed: \(reason)"
        }
    }
}
