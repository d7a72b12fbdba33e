/// Why a hub connection failed, closed or refused a command. `message` uses the texts of the
/// official clients where they have one; it never contains access tokens.
public struct HubConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The families of failures.
    public enum Kind: Hashable, Sendable {
        /// Negotiation failed (HTTP status, network error, error body, redirect limit, …).
        case negotiation
        /// The transport failed or closed.
        case transport
        /// The handshake failed or timed out.
        case handshake
        /// A connect attempt did not complete within `connectTimeout`.
        case connectTimeout
        /// The server sent nothing for the server timeout.
        case serverTimeout
        /// The server closed the connection with a Close message.
        case serverClosed
        /// The server violated the protocol (malformed message, unknown invocation id, …).
        case protocolViolation
        /// A command that needs a connected hub was given while it is not connected.
        case notConnected
        /// The stateful-reconnect send buffer is full (retry after `.sendBufferAvailable`), or the
        /// network has not taken what was sent already (the driver's `maximumUnsentBytes`).
        case sendBufferFull
        /// The invocation was canceled because the connection closed.
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
        case unauthorized
        /// The app's trust settings (`TLSTrust`: pinned public keys, its evaluator) refused the
        /// server's certificate. Final: no other transport and no reconnect is tried.
        case certificateRefused
        /// The connection cannot be made as configured (an URL that is not absolute http(s) or
        /// ws(s), TLS without a TLS layer, a token provider without a configuration asking for
        /// tokens): thrown when the connection is created.
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

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

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
