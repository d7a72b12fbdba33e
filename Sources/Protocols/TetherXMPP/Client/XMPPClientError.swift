public import TetherCore

/// Why an XMPP connection attempt failed or an established stream ended.
///
/// One shape for every failure: a `kind` to switch on, a `message` for people (never containing
/// a password, SCRAM proof or other credential), and the protocol detail where there is one.
/// `isFatal` says whether the machine reconnects after it.
public struct XMPPClientError: ConnectionError {
    /// What kind of failure (the kinds every Tether client shares, `ConnectionErrorKind`, and
    /// XMPP's own).
    public enum Kind: String, ConnectionErrorKind {
        /// The TCP connection could not be made (resolution, refusal, unreachable network).
        case connectionFailed
        /// The transport closed, or the server closed the stream, while it was in use.
        case connectionLost
        /// A connect attempt did not reach a usable stream within `connectTimeout`.
        case connectTimeout
        /// The server stopped answering: `maximumMissed` XEP-0199 pings in a row timed out (or a
        /// probe after the network changed).
        case serverTimeout
        /// The server sent a stream error (`streamError`).
        case streamError
        /// The server broke the protocol (malformed or restricted XML, a limit exceeded, an
        /// element out of place, an impossible acknowledgement); the client sent the stream error
        /// in `streamError` and closed.
        case protocolViolation
        /// SASL failed (`saslCondition`, `message` holds the server's text if any).
        case authenticationFailed
        /// The server failed SCRAM's proof that it knows the password (`v=` mismatch, foreign
        /// nonce, malformed server messages): maybe someone is in the middle.
        case serverAuthenticationFailed
        /// The server's signed hash of the SASL mechanisms and channel-binding types it offered
        /// (XEP-0474) does not match what the client saw: someone in the middle removed options
        /// to force a weaker login. The login is abandoned.
        case downgradeDetected
        /// None of the offered SASL mechanisms is acceptable (PLAIN on a cleartext stream needs
        /// `allowPlainOnCleartext`).
        case noAcceptableMechanism
        /// The configuration requires channel binding (`ChannelBindingPolicy.required`) and none
        /// is possible: no TLS, a TLS layer that gives no binding data, no -PLUS mechanism offered,
        /// or no channel-binding type both sides have.
        case channelBindingUnavailable
        /// TLS is required by the configuration but not possible (not offered, or no TLS layer),
        /// or the server requires TLS the configuration disables, or STARTTLS failed.
        case tlsUnavailable
        /// TLS could not be established for another reason than the certificate: the handshake
        /// failed (no common version or cipher, an alert), or a TLS record was broken.
        case tlsFailed
        /// The server's certificate was refused: an unknown CA, another host name, or the app's
        /// trust settings (`TLSTrust`: pinned public keys, its evaluator). Fatal, and never passed
        /// on to the next server of a DNS lookup.
        case certificateRefused
        /// The domain publishes in DNS that it offers no XMPP service (an SRV target of `.`).
        case serviceUnavailable
        /// The server requires a stream feature this client does not implement.
        case unsupportedRequiredFeature
        /// Resource binding failed (`stanzaError`).
        case bindFailed
        /// The legacy session establishment failed (`stanzaError`).
        case sessionFailed
        /// The configuration cannot work (an invalid JID, a password SASLprep rejects, …).
        case invalidConfiguration
        /// The app asked for something the connection cannot do now (a send while stopped or
        /// closing).
        case notConnected
        /// The queue of stanzas not yet acknowledged is full (`maximumQueuedStanzas`), or the
        /// network has not taken what was sent already (the driver's `maximumUnsentBytes`).
        case sendQueueFull
        /// The stanza is larger than the server accepts (XEP-0478 `max-bytes`); it was not sent.
        case stanzaTooLarge
        /// An iq request was answered with an error (`stanzaError`).
        case iqError
        /// An iq request was not answered in time.
        case iqTimeout
        /// A call ended before its answer: its task was canceled (a driver's async API), or the
        /// app stopped the connection while the call (an iq request, a flush) was pending.
        case canceled
    }

    /// What kind of failure.
    public let kind: Kind
    /// A description for people.
    public let message: String
    /// The stream error received (`streamError`) or sent (`protocolViolation`).
    public var streamError: StreamError? {
        guard case .values(let streamError, _, _) = details else { return nil }
        return streamError
    }
    /// The SASL failure condition (`authenticationFailed`), e.g. `not-authorized`.
    public var saslCondition: String? {
        guard case .values(_, let saslCondition, _) = details else { return nil }
        return saslCondition
    }
    /// The stanza error (`bindFailed`, `sessionFailed`).
    public var stanzaError: StanzaError? {
        guard case .values(_, _, let stanzaError) = details else { return nil }
        return stanzaError
    }

    /// The protocol's detail, when there is any, in a box of its own: an error is then a few
    /// words, and so is every event and action that can carry one (an iq's outcome, a lifecycle
    /// change), which the machine and the driver move on every input.
    private let details: Details?

    private indirect enum Details: Hashable, Sendable {
        case values(StreamError?, String?, StanzaError?)
    }

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.init(kind, message, streamError: nil)
    }

    /// An error with the protocol's detail.
    public init(
        _ kind: Kind,
        _ message: String,
        streamError: StreamError? = nil,
        saslCondition: String? = nil,
        stanzaError: StanzaError? = nil
    ) {
        self.kind = kind
        self.message = message
        details =
            streamError == nil && saslCondition == nil && stanzaError == nil
            ? nil : .values(streamError, saslCondition, stanzaError)
    }

    /// For the kinds that end a stream: whether reconnecting cannot help, so the machine stops
    /// instead (wrong credentials, another session took the resource with `conflict`, a server
    /// that is not what was asked for, configuration mistakes; `Specs/xmpp/client-machine.md`,
    /// "Reconnect"). The kinds that only fail one request (`notConnected`, `sendQueueFull`,
    /// `iqError`, `iqTimeout`) are not fatal.
    public var isFatal: Bool {
        switch kind {
        case .connectionFailed, .connectionLost, .connectTimeout, .serverTimeout, .protocolViolation, .notConnected,
            .sendQueueFull, .stanzaTooLarge, .iqError, .iqTimeout, .canceled:
            false
        case .streamError:
            !(streamError?.allowsReconnect ?? true)
        case .authenticationFailed:
            saslCondition != "temporary-auth-failure"
        case .serverAuthenticationFailed, .downgradeDetected, .noAcceptableMechanism, .channelBindingUnavailable,
            .tlsUnavailable, .tlsFailed, .certificateRefused,
            .serviceUnavailable,
            .unsupportedRequiredFeature,
            .bindFailed, .sessionFailed, .invalidConfiguration:
            true
        }
    }

}

extension XMPPClientError.Kind {
    /// Renamed: the same kind as SignalR's for a server that stopped answering.
    @available(*, unavailable, renamed: "serverTimeout")
    public static var pingTimeout: Self { .serverTimeout }
}
