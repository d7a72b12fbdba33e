/// The one shape of every Tether client's error (`XMPPClientError`, `HubConnectionError`): a
/// `kind` to switch on, a `message` for people (never a password, token or other secret),
/// whether reconnecting can help (`isFatal`), and one text format, `kind: message`.
///
/// The same situation has the same kind on every protocol (`ConnectionErrorKind` lists the kinds
/// they share); the errors stay typed from the machine to the app, so that code tells them apart
/// by kind, never by message text.
public protocol ConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The protocol's kinds (the shared ones among them).
    associatedtype Kind: ConnectionErrorKind
    /// What kind of failure.
    var kind: Kind { get }
    /// A description for people, without secrets.
    var message: String { get }
    /// Whether reconnecting cannot help, so the machine stops instead (wrong credentials, a
    /// refused certificate, a configuration that cannot work). Kinds that fail one call only
    /// (`notConnected`, `sendQueueFull`, `canceled`) are never fatal.
    var isFatal: Bool { get }
    /// An error of `kind` saying `message`.
    init(_ kind: Kind, _ message: String)
}

extension ConnectionError {
    /// `kind: message`, the same format for every protocol.
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// The kinds every protocol's error has, named the same, for the same situations. A protocol adds
/// its own (XMPP's `streamError`, SignalR's `negotiation`).
public protocol ConnectionErrorKind: RawRepresentable, Hashable, Sendable where RawValue == String {
    /// The transport could not be opened (resolution, refusal, an unreachable network, a TLS
    /// handshake that failed, an HTTP upgrade refused).
    static var connectionFailed: Self { get }
    /// A transport that was up closed, or the server ended the connection.
    static var connectionLost: Self { get }
    /// A connect attempt was not up within its `connectTimeout`.
    static var connectTimeout: Self { get }
    /// The server stopped answering: the keep-alive's deadline passed (XMPP: pings went
    /// unanswered; SignalR: nothing arrived within the server timeout).
    static var serverTimeout: Self { get }
    /// The server broke the protocol; the client sent the protocol's close and ended the
    /// connection.
    static var protocolViolation: Self { get }
    /// The configuration asks for TLS and there is no TLS layer (no session factory on this
    /// platform), or TLS is required and not possible.
    static var tlsUnavailable: Self { get }
    /// The app's trust settings (pins, its evaluator) refused the server's certificate. Fatal.
    static var certificateRefused: Self { get }
    /// The configuration cannot work. Fatal.
    static var invalidConfiguration: Self { get }
    /// The app asked for something the connection cannot do now (a send while stopped).
    static var notConnected: Self { get }
    /// There is no room to send now: the protocol's queue of unacknowledged messages is full, or
    /// the network has not taken what was sent already (the driver's `maximumUnsentBytes`).
    static var sendQueueFull: Self { get }
    /// A call ended before its answer: its task was canceled, or the connection closed (or was
    /// stopped) while the call was pending.
    static var canceled: Self { get }
}

/// Why a transport ended or could not be opened, as the driver reports it to the machine
/// (`transportClosed(generation:error:now:)`): a kind each protocol maps to its own error, and a
/// message without secrets.
public typealias TransportError = TetherError<TransportErrorKind>

/// What went wrong with a transport (`TransportError`).
public enum TransportErrorKind: String, ErrorKind {
    /// It could not be opened: the name did not resolve, the connection was refused, the
    /// network unreachable, the connect timed out.
    case connectionFailed
    /// It was up and ended without an orderly close (a reset, a broken pipe, a cut).
    case connectionLost
    /// TLS could not be established for another reason than the certificate (the handshake
    /// failed: no common version or cipher, an alert, a broken record), or TLS was asked of a
    /// transport that cannot have it.
    case tlsFailed
    /// The server's certificate was refused: not trusted, not valid for the name, or refused by
    /// the app's trust settings (`TLSTrust`: pins, its evaluator). Fatal.
    case certificateRefused
    /// The server answered an HTTP request that opens or carries the transport with 401.
    case unauthorized
    /// The server answered an HTTP request that opens or carries the transport with another
    /// status than the one it needs (a refused WebSocket upgrade, a failed poll).
    case rejected
    /// The peer broke the transport's protocol (a malformed WebSocket frame or HTTP response,
    /// a message in the wrong format or over the size limit, a missing subprotocol).
    case protocolViolation
    /// A request of the transport got no answer within its deadline.
    case timedOut
}
