import Dispatch
public import TetherCore
@_spi(TetherInternal) public import TetherDispatch
public import TetherXML
public import TetherXMPP

#if canImport(TetherTLS)
    import TetherTLS
#endif

/// An XMPP connection for apps: `XMPPClientMachine` run over a real socket on Dispatch.
///
/// ```swift
/// var configuration = XMPPClient.Configuration(jid: JID("alice@example.com/phone")!, password: password)
/// configuration.reconnectPolicy = .tiered(repeats: false)        // 5×3 s, 5×9 s, 5×15 s, then wait
/// let client = try XMPPClient(configuration: configuration)
/// client.setEventHandler(queue: .main) { event in
///     if case .message(let message) = event { print(message.body ?? "") }
/// }
/// let jid = try await client.connect()                           // connected (or a thrown error)
/// try await client.send(XMPPMessage(to: JID("bob@example.com"), body: "Hello"))
/// ```
///
/// One serial queue owns the machine, the transport and the timer; every public method hops onto
/// it. Events go to the handler (on the queue you choose) and to every `events()` stream, before
/// the awaiting call they end returns. The connection stays up through drops as the
/// configuration says (auto-ping, reconnect policy, stream management); `reconnectNow()` is the
/// hook for "the user tapped retry", "the app came to the foreground" and "the network is back".
/// `HubConnection` has the same shape (`ConnectionClient`: `Options`, `setEventHandler`,
/// `events()`, `state()`, `health()`, `reconnectNow()`, the device inputs, the one lifecycle,
/// logging and back-pressure); only the verbs that start and end a connection keep each
/// ecosystem's names (here `connect()` and `disconnect()`).
///
/// TLS (`configuration.tls`): `.required` (the default) uses STARTTLS and refuses a server that
/// does not offer it; `.direct` speaks TLS from the first byte (XEP-0368, port 5223); `.optional`
/// uses STARTTLS when offered. The certificate is verified for the JID's domain against the
/// system's trust store and `Options.caFile`. TLS sessions come from `Options.tlsSessionFactory`:
/// OpenSSL (`TetherTLS`) on Linux by default; on other platforms there is none unless the app
/// supplies one (or its own transport, `Options.transportFactory`), so there a client with
/// `.required` or `.direct` cannot be created: `init` throws `tlsUnavailable`.
///
/// XMPP over WebSocket (RFC 7395): set `configuration.webSocket` to a `ws://` or `wss://` URL
/// (prosody's `mod_websocket` serves `/xmpp-websocket`); TLS is then the URL's (`wss`), checked for
/// the URL's host with the same trust settings, and everything else works as over TCP.
public final class XMPPClient: ConnectionClient {
    /// The connection's configuration (the machine's).
    public typealias Configuration = XMPPClientMachine.Configuration
    /// What the app is told (the machine's events).
    public typealias Event = XMPPClientMachine.Event

    /// Driver settings beyond the protocol: queues, transports and TLS, back-pressure, logging
    /// (the same type as `HubConnection.Options`).
    public typealias Options = ConnectionOptions

    /// The machine's states, by name.
    public typealias StateName = XMPPClientMachine.StateName

    let core: XMPPRunner
    @_spi(TetherInternal) public var runner: any ConnectionRunning<Event, StateName> { core.runner }

    /// A client for `configuration` (not connected yet). `hashProvider` supplies SCRAM's
    /// cryptography (default: OpenSSL on Linux, CryptoKit on Apple platforms).
    ///
    /// Throws `tlsUnavailable` when the configuration asks for TLS (`tls: .required`, the default,
    /// or `.direct`) and `options.tlsSessionFactory` is nil (no TLS layer on this platform):
    /// supply one, or choose `.optional` / `.disabled` for a trusted network.
    public init(
        configuration: Configuration,
        options: Options = Options(),
        hashProvider: (any SCRAMHashProvider)? = nil
    ) throws(XMPPClientError) {
        let needsTLS =
            configuration.webSocket.map(\.isSecure) ?? (configuration.tls == .required || configuration.tls == .direct)
        if options.tlsSessionFactory == nil && needsTLS {
            throw XMPPClientError(
                .tlsUnavailable,
                "TLS is required, but there is no TLS layer on this platform (Options.tlsSessionFactory is nil): "
                    + "supply one, or set tls to .optional or .disabled to connect in cleartext on a trusted network."
            )
        }
        core = XMPPRunner(
            configuration: configuration,
            options: options,
            hashProvider: hashProvider ?? Self.defaultHashProvider
        )
    }

    deinit {
        core.runner.shutDown(keepingAlive: core)
    }

    static var defaultHashProvider: any SCRAMHashProvider {
        #if canImport(TetherTLS)
            OpenSSLHashProvider()
        #elseif canImport(CryptoKit)
            CryptoKitHashProvider()
        #else
            fatalError("no SCRAM hash provider on this platform: pass one to XMPPClient.init")
        #endif
    }

    // MARK: - Connecting

    /// Connects, and returns the full JID once a session is connected. Failed attempts are retried
    /// under the reconnect policy; throws when the policy gives up (the client is then
    /// suspended: `reconnectNow()` tries again) or on a fatal error such as wrong credentials
    /// (the client is then stopped), or `canceled` when the calling task is canceled first (the
    /// attempt is abandoned and the client stopped). Already connected: returns the current JID.
    @discardableResult
    nonisolated(nonsending) public func connect() async throws(XMPPClientError) -> JID {
        try await core.runner.connect()
    }

    /// Disconnects on purpose (a clean close; no reconnect) and returns once the client is
    /// stopped. Stanzas the server never acknowledged come in an `unacknowledgedStanzas` event;
    /// requests and flushes still waiting throw `canceled`.
    nonisolated(nonsending) public func disconnect() async {
        await core.runner.disconnect()
    }

    /// How the connected stream logged in: the SASL mechanism (`SCRAM-SHA-256-PLUS`) and the
    /// channel binding it used; nil while offline.
    nonisolated(nonsending) public func authentication() async -> XMPPAuthentication? {
        let runner = core.runner
        return await runner.call { handoff in handoff.resume(returning: runner.machine.authentication) }
    }

    /// What the app keeps between launches, as it stands (each change also comes as a
    /// `stateChanged` event): give it back in `Configuration.state` at the next launch.
    nonisolated(nonsending) public func clientState() async -> XMPPClientState {
        let runner = core.runner
        return await runner.call { handoff in handoff.resume(returning: runner.machine.clientState) }
    }

    /// Registers this device for push notifications (XEP-0357) through `registration`'s app
    /// server, or removes the registration (nil): at once when connected, else at the next session,
    /// and again at every new session. `pushEnabled`, `pushDisabled` or `pushRefused` follows.
    nonisolated(nonsending) public func setPush(_ registration: XMPPPushRegistration?) async {
        let runner = core.runner
        await runner.call { handoff in
            runner.machine.setPush(registration, now: runner.now())
            runner.drive()
            handoff.resume(returning: ())
        }
    }

    // MARK: - Sending

    /// Sends a message: queued while offline, kept until acknowledged with stream management.
    /// While `maximumQueuedStanzas` stanzas await acknowledgement it waits for room (or throws
    /// `sendQueueFull`, as `Options.backPressure` says); canceling the task while it waits throws
    /// `canceled`, and the message is not sent.
    nonisolated(nonsending) public func send(_ message: XMPPMessage) async throws(XMPPClientError) {
        try await core.runner.send { machine, now throws(XMPPClientError) in try machine.send(message, now: now) }
    }

    /// Sends a presence (waiting for room as `send(_:)` for messages).
    nonisolated(nonsending) public func send(_ presence: XMPPPresence) async throws(XMPPClientError) {
        try await core.runner.send { machine, now throws(XMPPClientError) in try machine.send(presence, now: now) }
    }

    /// Sends an iq without waiting for an answer: replies to `iqRequest` events (`iq.result()`,
    /// `iq.error(…)`), or a request whose answer comes as an `iqResponse` event.
    @discardableResult
    nonisolated(nonsending) public func send(_ iq: XMPPIQ) async throws(XMPPClientError) -> String {
        try await core.runner.send { machine, now throws(XMPPClientError) in try machine.send(iq, now: now) }
    }

    /// Sends any stanza.
    nonisolated(nonsending) public func send(stanza: XElement) async throws(XMPPClientError) {
        try await core.runner.send { machine, now throws(XMPPClientError) in try machine.send(stanza: stanza, now: now)
        }
    }

    /// Sends an iq request (`get` or `set`) and returns its `result`; throws `iqError` (with the
    /// stanza error) for an error reply, `iqTimeout`, the connection's error when the stream
    /// ended before an answer could come, or `canceled` at once when the calling task is canceled
    /// (the answer is then dropped).
    nonisolated(nonsending) public func request(
        _ iq: XMPPIQ,
        timeout: Duration? = nil
    ) async throws(XMPPClientError) -> XMPPIQ {
        precondition(iq.type.isRequest, "request(_:) takes a get or set iq; send(_:) sends replies")
        let result = await core.runner.call(
            IQRequestCall(core: core, iq: iq, timeout: timeout),
            returning: Result<XMPPIQ, XMPPClientError>.self
        )
        return try result.get()
    }

    /// Sends an iq request (`get` or `set`) and calls `completion` with its `result`, or with the
    /// error `request(_:timeout:)` would throw (never `canceled`: there is no task to cancel).
    /// It is called exactly once, also when the client is released first (`notConnected`).
    ///
    /// `completion` runs on the client's queue, as a task on `executor` does: right after the
    /// input that carried the answer, on the thread that read it (no thread hand-off), and what
    /// it sends leaves when it returns. The client's input waits while it runs: keep it short,
    /// and hand anything heavy or blocking to another queue. A request made from it is sent at
    /// once. The least work per request, for clients that make many (a bot, a gateway); `async`
    /// code uses `request(_:timeout:)`.
    public func request(
        _ iq: XMPPIQ,
        timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<XMPPIQ, XMPPClientError>) -> Void
    ) {
        precondition(iq.type.isRequest, "request(_:) takes a get or set iq; send(_:) sends replies")
        let core = core
        if core.runner.executor.isRunningJobOnThisThread {
            // From a completion (on the queue): no closure made to get there.
            core.request(iq, timeout: timeout, completion: completion)
        } else {
            core.runner.onQueue { core.request(iq, timeout: timeout, completion: completion) }
        }
    }

    /// Pings `jid` (the server when nil, XEP-0199) and returns the round-trip time. An error
    /// reply also proves the peer alive and counts as an answer.
    nonisolated(nonsending) public func ping(
        _ jid: JID? = nil,
        timeout: Duration? = nil
    ) async throws(XMPPClientError) -> Duration {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            _ = try await request(.ping(to: jid), timeout: timeout)
        } catch  where error.kind == .iqError {
            // An error reply is an answer too.
        }
        return .nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
    }

    /// Fetches the roster.
    nonisolated(nonsending) public func fetchRoster() async throws(XMPPClientError) -> RosterQuery {
        let result = try await request(RosterQuery.request())
        guard let query = result.payload.flatMap(RosterQuery.init) else {
            throw XMPPClientError(.iqError, "The roster result carries no roster query.")
        }
        return query
    }

    /// Returns once every stanza sent so far is acknowledged by the server (stream management),
    /// or, without it, written to the transport; asks the server for an acknowledgement at once.
    /// Throws when the client stops first, or `canceled` at once when the calling task is
    /// canceled.
    nonisolated(nonsending) public func flush() async throws(XMPPClientError) {
        let core = core
        let result: Result<Void, XMPPClientError> = await core.runner.call(
            { core.flush($0) },
            onCancel: { core.cancelFlush($0) }
        )
        try result.get()
    }
}
