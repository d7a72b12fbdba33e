/// What a connection machine asks of its driver: the output side of the machine contract, one
/// shape for every protocol (`Specs/machine-contract.md`).
///
/// Four actions are the same on every machine, and a generic runner carries them out without
/// knowing the protocol: open a transport of a kind for a generation, send on it, close it, and
/// tell the app (`event`). What only one protocol asks (XMPP's STARTTLS and service lookup,
/// SignalR's access token and negotiate request) is its `Request`, a small explicit extension the
/// protocol's client carries out; its answers come back as the machine's own inputs, naming the
/// generation they belong to.
public enum ConnectionAction<Request: Sendable & Equatable, Event: Sendable & Equatable>: Sendable, Equatable {
    /// Open a transport for `generation` as `TransportRequest` says, and report its events with
    /// that generation: `transportConnected` once it carries messages, `transportReceived` for
    /// each piece of input (bytes of a stream, or one whole message), `transportClosed` at its end.
    case openTransport(TransportRequest, generation: TransportGeneration)
    /// Send `bytes` on the transport of `generation` (one message on a message transport), after
    /// everything sent before. `containsCredentials` marks bytes a log must not show (SASL).
    case send([UInt8], generation: TransportGeneration, containsCredentials: Bool)
    /// Close the transport of `generation` (what was sent goes out first); no further input from
    /// it is used. Also abandons a protocol request of that generation still under way.
    case closeTransport(generation: TransportGeneration)
    /// Tell the app: a lifecycle change (`ConnectionEvent.lifecycle`) or a protocol event.
    case event(Event)
    /// One of the protocol's own requests (its `Request` type says what each asks and which
    /// input answers it).
    case request(Request)
}

extension ConnectionAction {
    /// Send `bytes` on the transport of `generation` (no credentials in them).
    public static func send(_ bytes: [UInt8], generation: TransportGeneration) -> Self {
        .send(bytes, generation: generation, containsCredentials: false)
    }
}

extension ConnectionAction: CustomStringConvertible {
    /// A short, readable rendering: what is sent as text or hex, cut short (credentials not shown);
    /// transport requests without their headers (which may hold a token).
    public var description: String {
        switch self {
        case .openTransport(let request, let generation): "openTransport(\(request), \(generation))"
        case .send(let bytes, let generation, let containsCredentials):
            containsCredentials
                ? "send(\(generation), \(bytes.count) bytes of credentials not shown)"
                : "send(\(generation), \(ByteDescription.describe(bytes)))"
        case .closeTransport(let generation): "closeTransport(\(generation))"
        case .event(let event): "event(\(event))"
        case .request(let request): "request(\(request))"
        }
    }
}

/// The transport a machine asks for: its kind and what every kind of its family needs.
///
/// A byte stream (`tcp`) hands up bytes as they arrive; the message transports (`webSocket`,
/// `serverSentEvents`, `longPolling`) hand up one whole message per input and send each `send`
/// as one message. TLS goes on any of them: from the first byte for `tcp` with a server name and
/// for `wss://` and `https://` URLs (the certificate checked for the URL's host), or later on a
/// byte stream when the protocol asks (STARTTLS).
public struct TransportRequest: Sendable, Hashable, CustomStringConvertible {
    /// Which transport.
    public indirect enum Kind: Sendable, Hashable {
        /// A TCP connection to `endpoint`; with `tlsServerName`, TLS from the first byte, the
        /// certificate verified for that name.
        case tcp(Endpoint, tlsServerName: String?)
        /// A WebSocket (RFC 6455) to a `ws://` or `wss://` URL, asking for `subprotocol` (which
        /// the server's answer must then name).
        case webSocket(ServerURL, subprotocol: String?)
        /// Server-Sent Events to an `http(s)://` URL: one `GET` carries what the server sends
        /// (text only), each send is a `POST`.
        case serverSentEvents(ServerURL)
        /// Long polling to an `http(s)://` URL: `GET` polls carry what the server sends, each
        /// send is a `POST`, a `DELETE` ends it.
        case longPolling(ServerURL)
    }

    /// Which transport, and where.
    public var kind: Kind
    /// Headers of the HTTP requests that open or carry the transport (the WebSocket upgrade, the
    /// event stream, the polls and sends); unused over TCP.
    public var headers: [String: String]
    /// The frame type (WebSocket) or content type (HTTP) of what is sent: text or binary.
    public var messageFormat: MessageFormat
    /// Whether a message received in the other format is taken as well (SignalR: servers send
    /// JSON in binary frames); false: it ends the transport with a `protocolViolation`.
    public var acceptsEitherFormat: Bool
    /// The largest message taken (message transports): a larger one ends the transport with
    /// `messageTooLarge`.
    public var maximumMessageSize: Int

    /// A request.
    public init(
        _ kind: Kind,
        headers: [String: String] = [:],
        messageFormat: MessageFormat = .text,
        acceptsEitherFormat: Bool = false,
        maximumMessageSize: Int = 1 << 20
    ) {
        self.kind = kind
        self.headers = headers
        self.messageFormat = messageFormat
        self.acceptsEitherFormat = acceptsEitherFormat
        self.maximumMessageSize = maximumMessageSize
    }

    /// Whether each input is one whole message (every kind but `tcp`).
    public var carriesMessages: Bool {
        if case .tcp = kind { return false }
        return true
    }

    /// Where and over what (`localhost:5222 over TCP`), without the headers (which may hold a
    /// token) or a token in the URL.
    public var description: String {
        switch kind {
        case .tcp(let endpoint, let name): "\(endpoint) over TCP\(name.map { " with TLS for \($0)" } ?? "")"
        case .webSocket(let url, let subprotocol):
            "\(url.redacted) over a WebSocket\(subprotocol.map { " (subprotocol \($0))" } ?? "")"
        case .serverSentEvents(let url): "\(url.redacted) over Server-Sent Events"
        case .longPolling(let url): "\(url.redacted) over long polling"
        }
    }
}

/// How a message transport frames what it sends: WebSocket text or binary frames; for HTTP sends,
/// `text/plain` or `application/octet-stream` bodies.
public enum MessageFormat: String, Hashable, Sendable {
    /// UTF-8 text (JSON, XML).
    case text
    /// Bytes (MessagePack).
    case binary
}
