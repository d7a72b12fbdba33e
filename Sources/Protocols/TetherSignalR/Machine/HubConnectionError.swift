public import TetherCore

/// Why a hub connection failed, closed or refused a command: the shape every Tether client's error
/// has (`ConnectionError`: a kind, a message, whether it is fatal, `kind: message`). `message`
/// uses the texts of the official clients where they have one; it never contains access tokens.
public struct HubConnectionError: ConnectionError {
    /// The families of failures (the kinds every Tether client shares, `ConnectionErrorKind`, and
    /// SignalR's own).
    public enum Kind: String, ConnectionErrorKind {
        /// Negotiation failed (HTTP status, error body, redirect limit, no usable transport, …).
        case negotiation
        /// The transport could not be opened (refused, unreachable, a WebSocket upgrade refused,
        /// the HTTP requests of a transport failing before it carried the handshake).
        case connectionFailed
        /// The transport closed while it was in use, or the server closed it.
        case connectionLost
        /// TLS could not be established for another reason than the certificate (the handshake
        /// failed: no common version or cipher, an alert; a broken record).
        case tlsFailed
        /// The URL asks for TLS and there is no TLS layer on this platform (no session factory):
        /// thrown when the connection is created.
        case tlsUnavailable
        /// The handshake failed or timed out.
        case handshake
        /// A connect attempt did not complete within `connectTimeout`.
        case connectTimeout
        /// The server sent nothing for the server timeout (or for a probe after the network
        /// changed).
        case serverTimeout
        /// The server closed the connection with a Close message that carried an error.
        case serverClosed
        /// The server violated the protocol (malformed message, unknown invocation id, …).
        case protocolViolation
        /// A command that needs a connected hub was given while it is not connected.
        case notConnected
        /// There is no room to send now: the stateful-reconnect send buffer is full (retry after
        /// `sendBufferAvailable`), or the network has not taken what was sent already (the
        /// driver's `maximumUnsentBytes`).
        case sendQueueFull
        /// The call ended before its answer: the connection closed (or was stopped) while the
        /// invocation or stream was pending, or the calling task was canceled.
        case canceled
        /// The upload stream or server invocation a command names is not open on this connection:
        /// it ended, or the connection restarted since it began (the app may race a reconnect).
        case unknownInvocation
        /// The hub method failed: the server's completion carried an error (the hub's exception
        /// text, "Unknown hub method '…'", or "Failed to invoke '…' due to an error on the
        /// server."), or a stream ended with one. `message` is the server's text.
        case invocationFailed
        /// The server refused the access token (HTTP 401 to negotiate or to opening the
        /// transport), also after the token provider was asked once more (or there is none).
        case authenticationFailed
        /// The server's certificate was refused: not trusted, not valid for the host, or refused by
        /// the app's trust settings (`TLSTrust`: pinned public keys, its evaluator). Fatal: no
        /// other transport and no reconnect is tried.
        case certificateRefused
        /// The connection cannot be made as configured (an URL that is not absolute http(s) or
        /// ws(s), a token provider without a configuration asking for tokens, no usable
        /// transport): thrown when the connection is created.
        case invalidConfiguration
        /// Arguments or a result could not be encoded (or, in the driver, a result, stream item or
        /// handler argument could not be decoded as the type asked for), or values came in
        /// another encoding than the connection's (JSON values on a MessagePack connection, or
        /// the reverse).
        case encoding
    }

    /// The family.
    public let kind: Kind
    /// The text.
    public let message: String

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// Whether reconnecting cannot help: a refused certificate and configurations that cannot
    /// work. Every other kind leaves the decision to the reconnect policy.
    public var isFatal: Bool {
        switch kind {
        case .certificateRefused, .tlsUnavailable, .invalidConfiguration: true
        case .negotiation, .connectionFailed, .connectionLost, .tlsFailed, .handshake, .connectTimeout, .serverTimeout,
            .serverClosed, .protocolViolation, .notConnected, .sendQueueFull, .canceled, .unknownInvocation,
            .invocationFailed, .authenticationFailed, .encoding:
            false
        }
    }

    static func unknownUploadStream(_ streamId: String) -> HubConnectionError {
        HubConnectionError(.unknownInvocation, "No upload stream '\(streamId)' is open on this connection.")
    }
    /// Pending invocations and streams fail with this when the connection closes first.
    public static let invocationCanceled = HubConnectionError(
        .canceled,
        "Invocation canceled due to the underlying connection being closed."
    )
    static let serverTimeout = HubConnectionError(
        .serverTimeout,
        "Server timeout elapsed without receiving a message from the server."
    )
    static let notConnected = HubConnectionError(
        .notConnected,
        "Cannot send data if the connection is not in the 'Connected' State."
    )
}

extension HubConnectionError.Kind {
    /// Renamed: the same kind as XMPP's for a send that finds no room.
    @available(*, unavailable, renamed: "sendQueueFull")
    public static var sendBufferFull: Self { .sendQueueFull }
    /// Renamed: the same kind as XMPP's for refused credentials.
    @available(*, unavailable, renamed: "authenticationFailed")
    public static var unauthorized: Self { .authenticationFailed }
    /// Split: `connectionFailed` (the transport could not be opened) or `connectionLost` (it
    /// closed while in use), the kinds XMPP has for the same situations.
    @available(*, unavailable, message: "use connectionFailed or connectionLost")
    public static var transport: Self { .connectionLost }
}
