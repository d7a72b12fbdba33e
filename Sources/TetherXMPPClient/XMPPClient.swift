public import Dispatch
public import TetherCore
public import TetherDispatch
public import TetherXML
public import TetherXMPP

#if canImport(TetherTLS)
    import TetherTLS
#endif

/// An XMPP connection for apps: `XMPPClientMachine` run over a real TCP socket on Dispatch.
///
/// ```swift
/// var configuration = XMPPClient.Configuration(jid: JID("alice@example.com/phone")!, password: password)
/// configuration.reconnectPolicy = .tiered(repeats: false)        // 5×3 s, 5×9 s, 5×15 s, then wait
/// configuration.autoPing = .init(interval: .seconds(20), timeout: .seconds(10), maximumMissed: 2)
/// let client = XMPPClient(configuration)
/// client.setEventHandler(queue: .main) { event in
///     if case .message(let message) = event { print(message.from, message.body ?? "") }
/// }
/// let jid = try await client.connect()                           // online (or a thrown error)
/// try await client.send(XMPPMessage(to: JID("bob@example.com"), body: "Hello"))
/// ```
///
/// One serial queue owns the machine, the socket and the timer; every public method hops onto
/// it. Events go to the handler (on the queue you choose) and to every `events()` stream. The
/// connection stays up through drops as the configuration says (auto-ping, reconnect policy,
/// stream management); `reconnectNow()` is the hook for "the user tapped retry", "the app came to
/// the foreground" and "the network is back".
///
/// TLS (`configuration.tls`): `.required` (the default) uses STARTTLS and refuses a server that
/// does not offer it; `.direct` speaks TLS from the first byte (XEP-0368, port 5223); `.optional`
/// uses STARTTLS when offered. The certificate is verified for the JID's domain against the
/// system's trust store and `Options.caFile`. TLS sessions come from `Options.tlsSessionFactory`:
/// OpenSSL (`TetherTLS`) on Linux by default; on other platforms there is none unless the app
/// supplies one, so there a client with `.required` or `.direct` cannot be created: `init`
/// throws `tlsUnavailable` (or run
/// `XMPPClientMachine` over Network.framework, which does TLS itself).
public final class XMPPClient: Sendable {
    /// The connection's configuration (the machine's).
    public typealias Configuration = XMPPClientMachine.Configuration
    /// What the app is told (the machine's events).
    public typealias Event = XMPPClientMachine.Event

    /// Driver settings beyond the protocol.
    public struct Options: Sendable {
        /// The timeout of each TCP connect (per resolved address; default 10 s). The addresses are
        /// raced as RFC 8305 says (a new one every 250 ms while earlier ones hang), so one that
        /// swallows the connect costs 250 ms, not this timeout. The machine's `connectTimeout`
        /// bounds the whole attempt.
        public var tcpConnectTimeout: Duration
        /// The most bytes read from the socket at once (default 64 KiB).
        public var readBufferSize: Int
        /// Called (on the connection's queue) with the XML traffic, for debugging. The content of
        /// SASL messages (the credentials) is replaced by a placeholder, their tags and the
        /// mechanism are kept; nothing else is redacted.
        public var trafficLog: (@Sendable (Traffic) -> Void)?
        /// Seeds reconnect jitter and ids (nil: random).
        public var randomSeed: UInt64?
        /// A PEM file of CA certificates trusted, for TLS, in addition to the system's (a
        /// private CA, a test server).
        public var caFile: String?
        /// Makes the TLS sessions (default: OpenSSL on Linux; nil elsewhere, where `.required`
        /// and `.direct` cannot be used: creating the client throws `tlsUnavailable`).
        public var tlsSessionFactory: TLSSessionFactory?

        /// Options.
        public init(
            tcpConnectTimeout: Duration = .seconds(10),
            readBufferSize: Int = 65536,
            trafficLog: (@Sendable (Traffic) -> Void)? = nil,
            randomSeed: UInt64? = nil,
            caFile: String? = nil,
            tlsSessionFactory: TLSSessionFactory? = defaultTLSSessionFactory
        ) {
            self.tcpConnectTimeout = tcpConnectTimeout
            self.readBufferSize = readBufferSize
            self.trafficLog = trafficLog
            self.randomSeed = randomSeed
            self.caFile = caFile
            self.tlsSessionFactory = tlsSessionFactory
        }
    }

    /// A piece of XML traffic, for `Options.trafficLog`.
    public struct Traffic: Sendable, Equatable {
        /// Which way it went.
        public enum Direction: String, Sendable, Equatable {
            case sent, received
        }

        /// Which way it went.
        public var direction: Direction
        /// The text (credentials replaced by a placeholder).
        public var text: String

        /// A SASL element as the log shows it: its start and end tags (the mechanism
        /// included), its content, which carries the credentials, replaced by a placeholder.
        static func hidingCredentials(_ bytes: [UInt8]) -> String {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let startTagEnd = text.firstIndex(of: ">"), let endTagStart = text.lastIndex(of: "<"),
                startTagEnd < endTagStart
            else { return "[\(bytes.count) bytes of SASL credentials not shown]" }
            let hidden = text.utf8.distance(from: text.index(after: startTagEnd), to: endTagStart)
            return text[...startTagEnd] + "[\(hidden) bytes of SASL credentials not shown]" + text[endTagStart...]
        }
    }

    let runner: XMPPRunner

    /// A client for `configuration` (not connected yet). `hashProvider` supplies SCRAM's
    /// cryptography (default: OpenSSL on Linux, CryptoKit on Apple platforms).
    ///
    /// Throws `tlsUnavailable` when the configuration asks for TLS (`tls: .required`, the default,
    /// or `.direct`) and `options.tlsSessionFactory` is nil (no TLS layer on this platform):
    /// supply one, or choose `.optional` / `.disabled` for a trusted network.
    public init(
        _ configuration: Configuration,
        options: Options = Options(),
        hashProvider: (any SCRAMHashProvider)? = nil
    ) throws(XMPPClientError) {
        if options.tlsSessionFactory == nil && (configuration.tls == .required || configuration.tls == .direct) {
            throw XMPPClientError(
                .tlsUnavailable,
                "TLS is required, but there is no TLS layer on this platform (Options.tlsSessionFactory is nil): "
                    + "supply one, or set tls to .optional or .disabled to connect in cleartext on a trusted network."
            )
        }
        runner = XMPPRunner(
            configuration: configuration,
            options: options,
            hashProvider: hashProvider ?? Self.defaultHashProvider
        )
    }

    deinit {
        runner.shutDown()
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

    /// Connects, and returns the full JID once a session is online. Failed attempts are retried
    /// under the reconnect policy; throws when the policy gives up (the client is then
    /// suspended: `reconnectNow()` tries again) or on a fatal error such as wrong credentials
    /// (the client is then stopped), or `canceled` when the calling task is canceled first (the
    /// attempt is abandoned and the client stopped). Already connected: returns the current JID.
    @discardableResult
    public func connect() async throws(XMPPClientError) -> JID {
        let runner = runner
        let result: Result<JID, XMPPClientError> = await withTaskCancellationHandler {
            await awaitHandoff { continuation in
                runner.queue.async { runner.connect(continuation) }
            }
        } onCancel: {
            runner.queue.async { runner.cancelConnect() }
        }
        return try result.get()
    }

    /// Disconnects on purpose (a clean close; no reconnect) and returns once the client is
    /// stopped. Stanzas the server never acknowledged come in an `unacknowledgedStanzas` event.
    public func disconnect() async {
        await awaitHandoff { continuation in
            runner.queue.async { [runner] in runner.disconnect(continuation) }
        }
    }

    /// Connect again now (see `XMPPClientMachine.reconnectNow(now:)`): from a suspended or
    /// waiting client at once with the back-off reset, abandoning a hung attempt, or, while
    /// online, with a ping that checks the link.
    public func reconnectNow() {
        runner.queue.async { [runner] in runner.reconnectNow() }
    }

    // MARK: - Sending

    /// Sends a message (queued while offline; kept until acknowledged with stream management).
    public func send(_ message: XMPPMessage) async throws(XMPPClientError) {
        try await perform { machine, now throws(XMPPClientError) in try machine.send(message, now: now) }
    }

    /// Sends a presence.
    public func send(_ presence: XMPPPresence) async throws(XMPPClientError) {
        try await perform { machine, now throws(XMPPClientError) in try machine.send(presence, now: now) }
    }

    /// Sends an iq without waiting for an answer: replies to `iqRequest` events (`iq.result()`,
    /// `iq.error(…)`), or a request whose answer comes as an `iqResponse` event.
    @discardableResult
    public func send(_ iq: XMPPIQ) async throws(XMPPClientError) -> String {
        try await perform { machine, now throws(XMPPClientError) in try machine.send(iq, now: now) }
    }

    /// Sends any stanza.
    public func send(stanza: XElement) async throws(XMPPClientError) {
        try await perform { machine, now throws(XMPPClientError) in try machine.send(stanza: stanza, now: now) }
    }

    /// Sends an iq request (`get` or `set`) and returns its `result`; throws `iqError` (with the
    /// stanza error) for an error reply, `iqTimeout`, the connection's error when the stream
    /// ended before an answer could come, or `canceled` at once when the calling task is canceled
    /// (the answer is then dropped).
    public func request(_ iq: XMPPIQ, timeout: Duration? = nil) async throws(XMPPClientError) -> XMPPIQ {
        precondition(iq.type.isRequest, "request(_:) takes a get or set iq; send(_:) sends replies")
        let call = Call()
        let runner = runner
        let result: Result<XMPPIQ, XMPPClientError> = await withTaskCancellationHandler {
            await awaitHandoff { continuation in
                runner.queue.async { runner.request(iq, timeout: timeout, call: call, continuation) }
            }
        } onCancel: {
            runner.queue.async { runner.cancel(call) }
        }
        return try result.get()
    }

    /// Pings `jid` (the server when nil, XEP-0199) and returns the round-trip time. An error
    /// reply also proves the peer alive and counts as an answer.
    public func ping(_ jid: JID? = nil, timeout: Duration? = nil) async throws(XMPPClientError) -> Duration {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            _ = try await request(.ping(to: jid), timeout: timeout)
        } catch  where error.kind == .iqError {
            // An error reply is an answer too.
        }
        return .nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
    }

    /// Fetches the roster.
    public func fetchRoster() async throws(XMPPClientError) -> RosterQuery {
        let result = try await request(RosterQuery.request())
        guard let query = result.payload.flatMap(RosterQuery.init) else {
            throw XMPPClientError(.iqError, "The roster result carries no roster query.")
        }
        return query
    }

    /// Returns once every stanza sent so far is acknowledged by the server (stream management),
    /// or, without it, written to the socket; asks the server for an acknowledgement at once.
    /// Throws when the client stops first, or `canceled` at once when the calling task is
    /// canceled.
    public func flush() async throws(XMPPClientError) {
        let call = Call()
        let runner = runner
        let result: Result<Void, XMPPClientError> = await withTaskCancellationHandler {
            await awaitHandoff { continuation in
                runner.queue.async { runner.flush(call: call, continuation) }
            }
        } onCancel: {
            runner.queue.async { runner.cancelFlush(call) }
        }
        try result.get()
    }

    private func perform<Result: Sendable>(
        _ body: @escaping @Sendable (inout XMPPClientMachine, Instant) throws(XMPPClientError) -> Result
    ) async throws(XMPPClientError) -> Result {
        let result: Swift.Result<Result, XMPPClientError> = await awaitHandoff { continuation in
            runner.queue.async { [runner] in continuation.resume(returning: runner.perform(body)) }
        }
        return try result.get()
    }

    // MARK: - Events

    /// Calls `handler` on `queue` with every event from now on (replacing an earlier handler).
    public func setEventHandler(queue: DispatchQueue, _ handler: @escaping @Sendable (Event) -> Void) {
        runner.queue.async { [runner] in runner.handler = (queue, handler) }
    }

    /// A stream of every event from now on (several streams may be open at once; a stream ends
    /// when the client is deinitialised). Events are buffered until read.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        runner.queue.async { [runner] in runner.addStream(continuation) }
        return stream
    }

    /// The machine's state now.
    public func state() async -> XMPPClientMachine.StateName {
        await awaitHandoff { continuation in
            runner.queue.async { [runner] in continuation.resume(returning: runner.machine.stateName) }
        }
    }
}

extension XMPPClient {
    /// One `request` or `flush` call, for canceling it from its task. Used only on the runner's
    /// queue.
    final class Call: @unchecked Sendable {
        /// The iq's id, once sent.
        var id: String?
        /// Its task was canceled.
        var isCanceled = false
    }
}

extension XMPPClientError {
    /// A call whose task was canceled.
    static let canceledByTask = XMPPClientError(.canceled, "The request's task was canceled.")
}
