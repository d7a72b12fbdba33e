public import Dispatch
public import TetherCore
import TetherHTTP

/// What a transport reports, on the queue it was made for: `connected` once (it carries messages
/// now; with TLS from the first byte, once TLS is up), then any number of `received` and
/// `drained`, `tlsEstablished` after `startTLS`, and at most one `closed`, after which nothing
/// follows.
public enum TransportEvent: Sendable {
    /// Open: bytes or messages flow now.
    case connected
    /// TLS inserted by `startTLS` is established.
    case tlsEstablished
    /// Input arrived: bytes of a stream (plaintext, once TLS is in place), or one whole message.
    case received([UInt8])
    /// Everything sent was handed to the network (after `unsentByteCount` had grown).
    case drained
    /// The transport ended, or could not be opened: nil for an orderly end, otherwise why (never a
    /// secret). Nothing follows.
    case closed(TransportError?)
}

/// One transport of one generation under a client's runner, whatever its kind
/// (`TransportRequest.Kind`): a TCP byte stream, a WebSocket, Server-Sent Events or long
/// polling, TLS on any of them; the same calls, the same events and the same count of what the
/// network has not taken.
///
/// The Dispatch driver's transports (`defaultTransportFactory`) are TCP with Happy Eyeballs and
/// OpenSSL, and the message transports built on it. An app can bring its own through
/// `ConnectionOptions.transportFactory`, for one kind or for all: a factory that makes TCP
/// connections over Network.framework and hands every other kind to `defaultTransportFactory`
/// gets the WebSocket and HTTP transports over its own connections.
///
/// Every call comes on the runner's queue and every event must be delivered on it, never from
/// inside a call (a failure found while sending is reported asynchronously), so that a runner
/// never re-enters its machine. After `close()` no event is delivered.
public protocol Transport: AnyObject {
    /// Connects (asynchronously): `connected`, or `closed`, follows.
    func start()
    /// Sends `bytes` after everything sent before: on a stream as they are (through TLS once it is
    /// in place), on a message transport as one message.
    func send(_ bytes: [UInt8])
    /// Sends `bytes` as `send` does, but may keep them until `flush()` so that the messages of a
    /// burst leave in one write (a message transport still frames each as its own message). The
    /// runner holds the sends made by a task on its executor and calls `flush()` when that task's
    /// job ends, before the queue turns to anything else; bytes held count in `unsentByteCount`.
    /// By default, `send(bytes)`.
    func hold(_ bytes: [UInt8])
    /// Writes what `hold` kept. By default, nothing (nothing was kept).
    func flush()
    /// Inserts TLS now (STARTTLS), verifying the certificate for `serverName`; `bufferedBytes`
    /// arrived after the protocol's go-ahead and are the start of the server's TLS data. Only a
    /// TCP stream can: the others end with a `tlsFailed` error.
    func startTLS(serverName: String, bufferedBytes: [UInt8])
    /// Closes (what was sent goes out first, with TLS's close_notify and the transport's own
    /// closing handshake); no event follows.
    func close()
    /// Bytes sent that the network (over HTTP: the server) has not taken yet.
    var unsentByteCount: Int { get }
    /// The TLS version in use (`TLSv1.3`), nil without TLS or when the transport does not tell.
    var tlsVersion: String? { get }
    /// The channel-binding data of the TLS under the transport (`TLSSession.channelBindings`),
    /// `.none` without TLS or when the transport does not tell. Read by the runner when the
    /// transport reports `connected` or `tlsEstablished`.
    var channelBindings: TLSChannelBindings { get }
}

extension Transport {
    /// Sends at once: this transport keeps nothing for `flush()`.
    public func hold(_ bytes: [UInt8]) { send(bytes) }
    /// Nothing kept.
    public func flush() {}
    /// Not told.
    public var tlsVersion: String? { nil }
    /// Not told.
    public var channelBindings: TLSChannelBindings { .none }
}

/// Makes the transports of a client, one per transport generation: the request, the client's
/// options (TLS, timeouts, the factory itself for the connections a message transport runs
/// over), the runner's queue, and where the transport's events go.
public typealias TransportFactory =
    @Sendable (TransportRequest, ConnectionOptions, DispatchQueue, @escaping (TransportEvent) -> Void) ->
    any Transport

/// The Dispatch driver's transports: TCP with the resolved addresses raced (RFC 8305) and TLS from
/// the options' session factory (OpenSSL on Linux); a WebSocket, Server-Sent Events or long
/// polling over connections from the options' factory (so that an app's own TCP transport carries
/// them too).
public let defaultTransportFactory: TransportFactory = { request, options, queue, onEvent in
    switch request.kind {
    case .tcp(let endpoint, let tlsServerName):
        TCPTransport(endpoint: endpoint, tlsServerName: tlsServerName, options: options, queue: queue, onEvent: onEvent)
    case .webSocket(let url, let subprotocol):
        WebSocketTransport(
            url: url,
            subprotocol: subprotocol,
            request: request,
            options: options,
            queue: queue,
            onEvent: onEvent
        )
    case .serverSentEvents(let url):
        HTTPStreamingTransport(
            .serverSentEvents,
            url: url,
            request: request,
            options: options,
            queue: queue,
            onEvent: onEvent
        )
    case .longPolling(let url):
        HTTPStreamingTransport(
            .longPolling,
            url: url,
            request: request,
            options: options,
            queue: queue,
            onEvent: onEvent
        )
    }
}

extension ConnectionOptions {
    /// A transport for `request` on `queue`, made by `transportFactory`.
    public func makeTransport(
        _ request: TransportRequest,
        queue: DispatchQueue,
        onEvent: @escaping (TransportEvent) -> Void
    ) -> any Transport {
        transportFactory(request, self, queue, onEvent)
    }

    /// A TCP transport to a URL's host: TLS from the first byte for https and wss, the certificate
    /// checked for the URL's host.
    public func makeConnection(
        to url: ServerURL,
        queue: DispatchQueue,
        onEvent: @escaping (TransportEvent) -> Void
    ) -> any Transport {
        makeTransport(
            TransportRequest(.tcp(url.endpoint, tlsServerName: url.isSecure ? url.host : nil)),
            queue: queue,
            onEvent: onEvent
        )
    }
}
