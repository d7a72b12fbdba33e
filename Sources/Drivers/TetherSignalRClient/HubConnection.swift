public import Dispatch
import Synchronization
public import TetherCore
@_spi(TetherInternal) public import TetherDispatch
public import TetherSignalR

/// A SignalR hub connection for apps: `HubConnectionMachine` run over real WebSockets (and
/// negotiate requests) on Dispatch, with TLS for `https://` hubs.
///
/// ```swift
/// let connection = HubConnectionBuilder(url: "https://example.com/hubs/chat")
///     .withHeaders(["X-Platform": "ios"])
///     .withAccessTokenProvider { try await session.freshToken() }
///     .withAutomaticReconnect(.tiered(repeats: false))
///     .build()
/// connection.on("ReceiveMessage") { (user: String, text: String) in print(user, text) }
/// connection.onReconnected { _ in Task { try await connection.invoke("JoinGroup", "lobby") } }
/// try await connection.start()
/// let sum: Int = try await connection.invoke("Add", 2, 3)
/// for try await n in connection.stream("Counter", 10, of: Int.self) { print(n) }
/// ```
///
/// One serial queue owns the machine, the sockets and the timer; every public method hops onto
/// it. Handlers and lifecycle callbacks run on the queue given when they are registered
/// (default: `Options.callbackQueue`), in the order the messages arrived. `XMPPClient` has the
/// same shape (`ConnectionClient`: `Options`, `setEventHandler`, `events()`, `state()`,
/// `health()`, `reconnectNow()`, the device inputs, the one lifecycle, logging and
/// back-pressure); only the verbs that start and end a connection keep each ecosystem's names
/// (here `start()` and `stop()`).
///
/// Server→client methods match registered names case-insensitively, as the servers match hub
/// methods. An invocation of a method nobody handles is logged at `warning` ("No client method
/// with the name '…' found.", as the official clients log it); one that expected a result is
/// answered with an error.
public final class HubConnection: ConnectionClient {
    /// The protocol-level configuration (the machine's).
    public typealias Configuration = HubConnectionMachine.Configuration

    /// The `User-Agent` sent with the negotiate request and the WebSocket upgrade.
    public static let userAgent = ConnectionOptions().userAgent

    /// Driver settings beyond the protocol: queues, transports and TLS, back-pressure, logging
    /// (the same type as `XMPPClient.Options`).
    public typealias Options = ConnectionOptions

    /// Replaced by `Event`, the same for both clients.
    @available(*, unavailable, renamed: "Event")
    public typealias LifecycleEvent = Event

    /// What the app is told (server calls go to the `on` handlers instead).
    public enum Event: Sendable, Equatable {
        /// A lifecycle change, the same on every Tether client (`ConnectionLifecycle`):
        /// `connected` is a new connection (after `start()`, a reconnect, or the return from the
        /// background: join groups here), `resumed` a stateful reconnect that kept the connection
        /// (nothing lost, nothing to redo), then `connectionLost`, `attemptFailed`,
        /// `reconnecting`, `waitingForNetwork`, `suspended` and `closed`.
        case lifecycle(HubConnectionMachine.Lifecycle)
        /// The server invoked a method nobody handles (also logged at `warning`, as the official
        /// clients do); one that expected a result was answered with an error.
        case unhandledInvocation(InvocationMessage)
    }

    /// The machine's states, by name.
    public typealias StateName = HubConnectionMachine.StateName

    let core: HubRunner
    @_spi(TetherInternal) public var runner: any ConnectionRunning<Event, StateName> { core.runner }
    /// The encoding of this connection's values (from its hub protocol).
    public let encoding: ValueEncoding

    /// A connection for `configuration` speaking `hubProtocol` (not started). With
    /// `accessTokenProvider` (and `configuration.asksForAccessToken`, which says the machine asks
    /// for it), a token is asked for before every connection attempt and sent as `Authorization:
    /// Bearer …`; otherwise `configuration.accessToken` is used.
    ///
    /// Throws `tlsUnavailable` when the URL asks for TLS and `options.tlsSessionFactory` is nil (no
    /// TLS layer on this platform: supply one), and `invalidConfiguration` when the connection
    /// could never be made: the URL is not an absolute http, https, ws or wss URL; the token
    /// provider and `asksForAccessToken`
    /// disagree (`HubConnectionBuilder` keeps them consistent); or no allowed transport can be
    /// used (`transports` empty, without WebSockets when negotiation is skipped, or only Server-Sent
    /// Events for a binary protocol).
    public init(
        configuration: Configuration,
        hubProtocol: AnyHubProtocol = .json(JSONHubProtocol()),
        options: Options = Options(),
        accessTokenProvider: (@Sendable () async throws -> String?)? = nil
    ) throws(HubConnectionError) {
        guard let url = ServerURL(configuration.url) else {
            throw HubConnectionError(
                .invalidConfiguration,
                "The URL '\(ServerURL.redacted(configuration.url))' is not an absolute http, https, ws or wss URL."
            )
        }
        if url.isSecure && options.tlsSessionFactory == nil {
            throw HubConnectionError(
                .tlsUnavailable,
                "The URL asks for TLS, but there is no TLS layer on this platform: supply one with "
                    + "Options.tlsSessionFactory (HubConnectionBuilder.withTLSSessionFactory)."
            )
        }
        guard configuration.asksForAccessToken == (accessTokenProvider != nil) else {
            throw HubConnectionError(
                .invalidConfiguration,
                accessTokenProvider == nil
                    ? "The configuration asks for access tokens (asksForAccessToken), but no token provider was given."
                    : "A token provider was given, but the configuration does not ask for tokens (set asksForAccessToken)."
            )
        }
        if let problem = Self.transportProblem(configuration, format: hubProtocol.transferFormat) {
            throw HubConnectionError(.invalidConfiguration, problem)
        }
        core = HubRunner(
            configuration: configuration,
            hubProtocol: hubProtocol,
            options: options,
            accessTokenProvider: accessTokenProvider
        )
        encoding = hubProtocol.valueEncoding
    }

    deinit {
        core.runner.shutDown(keepingAlive: core)
    }

    // MARK: - Lifecycle

    /// Connects: negotiates, opens the WebSocket and completes the handshake. Throws when that
    /// fails (the first connection is not retried, as with the official clients, unless
    /// `retriesFailedStart`; automatic reconnect applies once connected), or `canceled` when the
    /// calling task is canceled first (the attempt is abandoned). Already connected: returns at
    /// once.
    nonisolated(nonsending) public func start() async throws(HubConnectionError) {
        _ = try await core.runner.connect()
    }

    /// Stops (a Close message, then the WebSocket's closing handshake) and returns once closed.
    /// Pending invocations and streams fail with `canceled`.
    nonisolated(nonsending) public func stop() async {
        await core.runner.disconnect()
    }

    /// The transport of the current connection (nil unless connected, resuming or opening one).
    nonisolated(nonsending) public func transport() async -> HubTransport? {
        let runner = core.runner
        return await runner.call { $0.resume(returning: runner.machine.transport) }
    }

    /// The current connection id (nil unless connected after a negotiation).
    nonisolated(nonsending) public func connectionId() async -> String? {
        let runner = core.runner
        return await runner.call { $0.resume(returning: runner.machine.connectionId) }
    }

    /// Also calls `handler` on `queue` with every lifecycle change from now on.
    private func observe(queue: DispatchQueue?, _ handler: @escaping @Sendable (HubConnectionMachine.Lifecycle) -> Void)
    {
        core.runner.addObserver(queue: queue) { event in
            if case .lifecycle(let change) = event { handler(change) }
        }
    }

    /// Calls `handler` with every new connection (`connected`): after `start()`, after a
    /// reconnect, after the return from the background. The place to join groups, which do not
    /// survive a new connection.
    public func onConnected(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (HubSession) -> Void) {
        observe(queue: queue) { change in
            if case .connected(let session) = change { handler(session) }
        }
    }

    /// Calls `handler` when the connection is lost (`connectionLost`, once per loss, as the
    /// official clients' `onreconnecting`): the reconnect policy or, with stateful reconnect, a
    /// resume follows (the event handler also sees every attempt).
    public func onReconnecting(
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (HubConnectionError) -> Void
    ) {
        observe(queue: queue) { change in
            if case .connectionLost(let error) = change { handler(error) }
        }
    }

    /// Calls `handler` with a new connection that follows a lost one (`connected` after
    /// `connectionLost`, as the official clients' `onreconnected`): the place to re-join groups.
    /// A stateful reconnect that kept the connection is `resumed` instead, and calls nothing here.
    public func onReconnected(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (HubSession) -> Void) {
        let lost = LossFlag()
        observe(queue: queue) { change in
            switch change {
            case .connectionLost: lost.set(true)
            case .connected(let session): if lost.set(false) { handler(session) }
            case .closed: lost.set(false)
            case .resumed, .attemptFailed, .reconnecting, .waitingForNetwork, .suspended: break
            }
        }
    }

    /// Calls `handler` when the connection is suspended, with why: the reconnect policy gave up
    /// (`gaveUp`, the place to offer "retry", which calls `reconnectNow()`), or it closed for the
    /// background (`background`).
    public func onSuspended(
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (SuspensionReason<HubConnectionError>) -> Void
    ) {
        observe(queue: queue) { change in
            if case .suspended(let reason) = change { handler(reason) }
        }
    }

    /// Calls `handler` when the connection closes for good (nil after `stop()`; the error of a
    /// failed `start()` or a fatal one otherwise).
    public func onClosed(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (HubConnectionError?) -> Void) {
        observe(queue: queue) { change in
            if case .closed(let error) = change { handler(error) }
        }
    }

    // MARK: - Server → client

    /// Handles the server's invocations of `target` with `handler` (on `queue`, default
    /// `Options.callbackQueue`), its arguments decoded as the handler's parameter types (by a
    /// type's own `init(json:)` or `init(messagePack:)` when it has one for the connection's
    /// encoding, else through `Codable`; the same for `invoke`'s results and `stream`'s items).
    /// Arguments beyond those are ignored; an invocation with fewer, or with values that do not
    /// decode, is logged at `error` and not handled. Several handlers of one target are all
    /// called.
    public func on<each Argument: Decodable & SendableMetatype>(
        _ target: String,
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (repeat each Argument) -> Void
    ) {
        on(target, queue: queue) { (arguments: EncodedArguments) throws in
            let cursor = ArgumentCursor(arguments)
            handler(repeat try cursor.next((each Argument).self))
        }
    }

    /// Handles `target` with the raw, still encoded arguments.
    public func on(
        _ target: String,
        queue: DispatchQueue? = nil,
        arguments handler: @escaping @Sendable (EncodedArguments) throws -> Void
    ) {
        let entry = InvocationHandler(queue: queue ?? core.runner.callbackQueue, call: handler)
        core.runner.queue.async { [core] in core.addHandler(target, entry) }
    }

    /// Answers the server's invocations of `target` that expect a result (client results): the
    /// handler's return value is sent back, a thrown error as the invocation's error (its
    /// description goes to the server). One result handler per target: a later one replaces it.
    /// The handler runs on a task of its own.
    public func onClientResult<each Argument: Decodable & SendableMetatype, Result: Encodable & SendableMetatype>(
        _ target: String,
        _ handler: @escaping @Sendable (repeat each Argument) async throws -> Result
    ) {
        let entry = ResultHandler { arguments, encoding in
            let cursor = ArgumentCursor(arguments)
            let value = try await handler(repeat try cursor.next((each Argument).self))
            return try EncodedValue(value, encoding: encoding)
        }
        core.runner.queue.async { [core] in core.setResultHandler(target, entry) }
    }

    /// Removes every handler of `target` (later invocations are unhandled: logged, and answered
    /// with an error when they expect a result).
    public func off(_ target: String) {
        core.runner.queue.async { [core] in core.removeHandlers(target) }
    }

    // MARK: - Client → server

    /// Invokes the hub method `method` with any `Encodable` arguments and returns its result
    /// decoded as `Result`. Throws `invocationFailed` with the server's text when the method
    /// failed, `canceled` when the connection closed first or the calling task was canceled (the
    /// server still runs the method; its result is dropped), `notConnected`, or `encoding`.
    nonisolated(nonsending) public func invoke<Result: Decodable, each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) -> Result {
        let encoded = try encode(repeat each arguments)
        return try Self.decodeResult(await invoke(method, arguments: encoded), method: method, encoding: encoding)
    }

    /// Invokes the hub method `method` and waits for it to complete (its result, if any, is
    /// ignored).
    nonisolated(nonsending) public func invoke<each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) {
        _ = try await invoke(method, arguments: encode(repeat each arguments))
    }

    /// Invokes `method` with already encoded arguments (in this connection's encoding) and returns
    /// the encoded result (nil for a void method).
    nonisolated(nonsending) public func invoke(
        _ method: String,
        arguments: EncodedArguments
    ) async throws(HubConnectionError) -> EncodedValue? {
        try await invoke(method, arguments: arguments, upload: nil)
    }

    /// Invokes `method` with a client→server stream: the items of `upload` are sent as they come
    /// (the method's stream parameter, after the other arguments), its end or error ends the
    /// stream. Returns the method's result.
    nonisolated(nonsending) public func invoke<
        Result: Decodable,
        Upload: AsyncSequence & Sendable,
        each Argument: Encodable
    >(
        _ method: String,
        _ arguments: repeat each Argument,
        upload: Upload
    ) async throws(HubConnectionError) -> Result where Upload.Element: Encodable {
        let encoded = try encode(repeat each arguments)
        let pump = UploadPump(upload, encoding: encoding)
        return try Self.decodeResult(
            await invoke(method, arguments: encoded, upload: pump),
            method: method,
            encoding: encoding
        )
    }

    /// Invokes the hub method `method` and calls `completion` with its result decoded as
    /// `Result`, or with the error the awaited `invoke` would throw (never `canceled` by a task:
    /// there is none; the connection closing first still ends it with `canceled`). It is called
    /// exactly once, also when the connection is released first (`notConnected`).
    ///
    /// `completion` runs on the connection's queue, as a task on `executor` does: right after the
    /// input that carried the completion, on the thread that read it, and what it sends leaves
    /// when it returns. The connection's input waits while it runs: keep it short, and hand
    /// anything heavy or blocking to another queue. An invocation made from it is sent at once.
    /// The least work per call, for clients that make many; `async` code awaits `invoke`.
    public func invoke<Result: Decodable & SendableMetatype, each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument,
        returning: Result.Type = Result.self,
        completion: @escaping @Sendable (Swift.Result<Result, HubConnectionError>) -> Void
    ) {
        let encoding = encoding
        let encoded: EncodedArguments
        do {
            encoded = try encode(repeat each arguments)
        } catch {
            return core.runner.executor.perform { completion(.failure(error)) }
        }
        invoke(method, arguments: encoded) { result in
            completion(
                result.flatMap { value in
                    Swift.Result { () throws(HubConnectionError) in
                        try Self.decodeResult(value, method: method, encoding: encoding)
                    }
                }
            )
        }
    }

    /// Invokes `method` with already encoded arguments (in this connection's encoding) and calls
    /// `completion` with the encoded result (nil for a void method), as the typed
    /// `invoke(_:_:returning:completion:)` does.
    public func invoke(
        _ method: String,
        arguments: EncodedArguments,
        completion: @escaping @Sendable (Swift.Result<EncodedValue?, HubConnectionError>) -> Void
    ) {
        let core = core
        if core.runner.executor.isRunningJobOnThisThread {
            // From a completion (on the queue): no closure made to get there.
            core.invoke(method, arguments: arguments, completion: completion)
        } else {
            core.runner.onQueue { core.invoke(method, arguments: arguments, completion: completion) }
        }
    }

    private func invoke(
        _ method: String,
        arguments: EncodedArguments,
        upload: UploadPump?
    ) async throws(HubConnectionError) -> EncodedValue? {
        let result = await core.runner.call(
            HubCall(.invocation, core: core, target: method, arguments: arguments, upload: upload),
            returning: Swift.Result<EncodedValue?, HubConnectionError>.self
        )
        return try result.get()
    }

    /// Calls `method` without waiting for it (a non-blocking invocation); returns once the message
    /// is handed to the transport. While the stateful-reconnect buffer is full it waits for room;
    /// canceling the calling task then throws `canceled` at once, and the message is not sent.
    nonisolated(nonsending) public func send<each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) {
        try await send(method, arguments: encode(repeat each arguments), upload: nil)
    }

    /// Calls `method` without waiting for it, with already encoded arguments.
    nonisolated(nonsending) public func send(
        _ method: String,
        arguments: EncodedArguments
    ) async throws(HubConnectionError) {
        try await send(method, arguments: arguments, upload: nil)
    }

    /// Calls `method` without waiting for it, with a client→server stream fed from `upload`.
    nonisolated(nonsending) public func send<Upload: AsyncSequence & Sendable, each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument,
        upload: Upload
    ) async throws(HubConnectionError) where Upload.Element: Encodable {
        try await send(method, arguments: encode(repeat each arguments), upload: UploadPump(upload, encoding: encoding))
    }

    private func send(
        _ method: String,
        arguments: EncodedArguments,
        upload: UploadPump?
    ) async throws(HubConnectionError) {
        let result = await core.runner.call(
            HubCall(.send, core: core, target: method, arguments: arguments, upload: upload),
            returning: Result<Void, HubConnectionError>.self
        )
        try result.get()
    }

    /// Calls the streaming hub method `method`; its items arrive decoded as `Item`. The stream
    /// throws `invocationFailed` when the method fails, `canceled` when the connection closes
    /// first, `encoding` for an item that does not decode. Ending the iteration early (or
    /// dropping the stream) cancels the method on the server.
    public func stream<Item: Decodable & Sendable, each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument,
        of itemType: Item.Type = Item.self
    ) -> AsyncThrowingStream<Item, any Error> {
        let encoded: EncodedArguments
        do throws(HubConnectionError) {
            encoded = try encode(repeat each arguments)
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        let (stream, continuation) = AsyncThrowingStream<Item, any Error>.makeStream()
        let method = method
        start(method, arguments: encoded, continuation: continuation) { value throws(HubConnectionError) in
            do {
                return try value.decodeByItsFastPath(Item.self)
            } catch {
                throw HubConnectionError(
                    .encoding,
                    "An item of '\(method)' cannot be decoded as \(Item.self): \(error)"
                )
            }
        }
        return stream
    }

    /// Calls the streaming method `method` with already encoded arguments; the items stay encoded.
    public func stream(_ method: String, arguments: EncodedArguments) -> AsyncThrowingStream<EncodedValue, any Error> {
        let (stream, continuation) = AsyncThrowingStream<EncodedValue, any Error>.makeStream()
        start(method, arguments: arguments, continuation: continuation) { $0 }
        return stream
    }

    private func start<Item: Sendable>(
        _ method: String,
        arguments: EncodedArguments,
        continuation: AsyncThrowingStream<Item, any Error>.Continuation,
        decode: @escaping @Sendable (EncodedValue) throws(HubConnectionError) -> Item
    ) {
        let sink = StreamSink(
            yield: { value in
                do throws(HubConnectionError) {
                    continuation.yield(try decode(value))
                    return true
                } catch {
                    continuation.finish(throwing: error)
                    return false
                }
            },
            finish: { error in
                if let error { continuation.finish(throwing: error) } else { continuation.finish() }
            }
        )
        let core = core
        continuation.onTermination = { termination in
            guard case .cancelled = termination else { return }
            core.runner.queue.async { core.consumerLeft(sink) }
        }
        core.runner.queue.async { core.stream(method, arguments: arguments, sink: sink) }
    }

    // MARK: - Encoding

    private func encode<each Argument: Encodable>(
        _ arguments: repeat each Argument
    ) throws(HubConnectionError) -> EncodedArguments {
        try HubConnectionMachine.encodeArguments(repeat each arguments, as: encoding)
    }

    static func decodeResult<Result: Decodable>(
        _ value: EncodedValue?,
        method: String,
        encoding: ValueEncoding
    ) throws(HubConnectionError) -> Result {
        do {
            return try (value ?? .null(encoding)).decodeByItsFastPath(Result.self)
        } catch {
            throw HubConnectionError(
                .encoding,
                "The result of '\(method)' cannot be decoded as \(Result.self): \(error)"
            )
        }
    }
}

extension HubConnection {
    /// Why `configuration.transports` can never carry a connection in `format`, if so.
    static func transportProblem(_ configuration: Configuration, format: TransferFormat) -> String? {
        if configuration.transports.isEmpty { return "No transport is allowed (transports is empty)." }
        if configuration.skipNegotiation && !configuration.transports.contains(.webSockets) {
            return "Negotiation can only be skipped when using the WebSocket transport directly."
        }
        if !configuration.transports.contains(where: { $0.carries(format) }) {
            return "Server-Sent Events carry text only: a binary hub protocol (MessagePack) needs WebSockets or "
                + "long polling."
        }
        return nil
    }
}

/// Whether a connection was lost since the last new one (`onReconnected`'s memory).
private final class LossFlag: Sendable {
    private let value = Mutex(false)

    /// Sets the flag; returns what it was.
    @discardableResult
    func set(_ new: Bool) -> Bool {
        value.withLock { value in
            defer { value = new }
            return value
        }
    }
}
