public import Dispatch
public import TetherCore
public import TetherDispatch
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
/// (default: `Options.callbackQueue`), in the order the messages arrived.
///
/// Server→client methods match registered names case-insensitively, as the servers match hub
/// methods. An invocation of a method nobody handles is logged at `warning` ("No client method
/// with the name '…' found.", as the official clients log it); one that expected a result is
/// answered with an error.
public final class HubConnection: Sendable {
    /// The protocol-level configuration (the machine's).
    public typealias Configuration = HubConnectionMachine.Configuration

    /// The `User-Agent` sent with the negotiate request and the WebSocket upgrade.
    public static let userAgent = "Tether/0.1 (Swift)"

    /// Driver settings beyond the protocol: queues, transports and TLS, back-pressure, logging
    /// (the same type as `XMPPClient.Options`).
    public typealias Options = ConnectionOptions

    /// A change of the connection's life (server calls go to the `on` handlers instead).
    public enum Event: Sendable, Equatable {
        /// `start()` connected, over `transport`.
        case connected(connectionId: String?, transport: HubTransport)
        /// The reconnect policy scheduled attempt number `attempt` (from 1) in `delay`: once when
        /// the connection is lost (with the error that lost it), then before every further
        /// attempt (with the last attempt's error).
        case reconnecting(HubConnectionError?, attempt: Int, delay: Duration)
        /// The connection is lost and the device has no network (`networkChanged`): nothing is
        /// tried, or counted, until it is back.
        case waitingForNetwork
        /// Reconnected: a new connection (re-join groups here), over `transport` (chosen again).
        case reconnected(connectionId: String?, transport: HubTransport)
        /// The reconnect policy gave up (with the last attempt's error): `reconnectNow()` (or
        /// `start()`) connects again, `stop()` ends it. Nothing is retried meanwhile.
        case suspended(HubConnectionError?)
        /// Closed for good (nil after `stop()`). Only a connection that connected closes: a
        /// failed `start()` throws instead.
        case closed(HubConnectionError?)
    }

    let runner: HubRunner
    let callbackQueue: DispatchQueue
    /// The encoding of this connection's values (from its hub protocol).
    public let encoding: ValueEncoding

    /// A connection for `configuration` speaking `hubProtocol` (not started). With
    /// `accessTokenProvider` (and `configuration.asksForAccessToken`, which says the machine asks
    /// for it), a token is asked for before every connection attempt and sent as `Authorization:
    /// Bearer …`; otherwise `configuration.accessToken` is used.
    ///
    /// Throws `invalidConfiguration` when the connection could never be made: the URL is not an
    /// absolute http, https, ws or wss URL; it asks for TLS and `options.tlsSessionFactory` is nil
    /// (no TLS layer on this platform: supply one); the token provider and `asksForAccessToken`
    /// disagree (`HubConnectionBuilder` keeps them consistent); or no allowed transport can be
    /// used (`transports` empty, without WebSockets when negotiation is skipped, or only Server-Sent
    /// Events for a binary protocol).
    public init(
        configuration: Configuration,
        hubProtocol: AnyHubProtocol = .json(JSONHubProtocol()),
        options: Options = Options(),
        accessTokenProvider: (@Sendable () async throws -> String?)? = nil
    ) throws(HubConnectionError) {
        guard let url = HubURL(configuration.url) else {
            throw HubConnectionError(
                .invalidConfiguration,
                "The URL '\(HubLog.redacted(configuration.url))' is not an absolute http, https, ws or wss URL."
            )
        }
        if url.isSecure && options.tlsSessionFactory == nil {
            throw HubConnectionError(
                .invalidConfiguration,
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
        runner = HubRunner(
            configuration: configuration,
            hubProtocol: hubProtocol,
            options: options,
            accessTokenProvider: accessTokenProvider
        )
        callbackQueue =
            options.callbackQueue
            ?? DispatchQueue(label: "tether.hub-connection.callbacks", target: DispatchQueue.global())
        encoding = hubProtocol.valueEncoding
    }

    deinit {
        runner.shutDown()
    }

    // MARK: - Lifecycle

    /// Connects: negotiates, opens the WebSocket and completes the handshake. Throws when that
    /// fails (the first connection is not retried, as with the official clients; automatic
    /// reconnect applies once connected), or `canceled` when the calling task is canceled first
    /// (the attempt is abandoned). Already connected: returns at once.
    public func start() async throws(HubConnectionError) {
        let runner = runner
        let result: Result<Void, HubConnectionError> = await runner.core.call(
            { runner.start($0) },
            onCancel: { runner.cancelStart() }
        )
        try result.get()
    }

    /// Connect again now: the hook for "the user tapped retry", "the app came to the foreground"
    /// and "the network is back" (see `HubConnectionMachine.reconnectNow(now:)`). After the
    /// reconnect policy gave up or while waiting for its next delay: a new attempt at once, the
    /// back-off reset; an attempt under way is abandoned for a fresh one; connected: nothing.
    public func reconnectNow() {
        runner.core.queue.async { [runner] in runner.reconnectNow() }
    }

    /// The device's network changed: feed it what `NWPathMonitor` (Apple platforms) or
    /// `NetworkMonitor` (Linux) reports. See `HubConnectionMachine.networkChanged(_:now:)`: no
    /// attempts while there is no network, a reconnect at once when it is back, a probe (or, with
    /// stateful reconnect, a reopen on the new network) when it changes.
    public func networkChanged(_ path: NetworkPath) {
        runner.core.queue.async { [runner] in runner.networkChanged(path) }
    }

    /// The app moved between foreground and background (its scene phase). See
    /// `HubConnectionMachine.applicationStateChanged(_:now:)` and `Configuration.backgroundPolicy`.
    public func applicationStateChanged(_ application: ApplicationState) {
        runner.core.queue.async { [runner] in runner.applicationStateChanged(application) }
    }

    /// Stops (a Close message, then the WebSocket's closing handshake) and returns once closed.
    /// Pending invocations fail with `canceled`.
    public func stop() async {
        let runner = runner
        await runner.core.call { runner.stop($0) }
    }

    /// The connection's queue as a task executor, for the least latency per call: the code of
    /// `withTaskExecutorPreference(connection.executor) { … }` runs on the connection's queue, and
    /// each answer resumes it at once on the thread that read it, not on another thread of the
    /// pool. While that code runs, the connection's input waits: keep it short between calls
    /// (`ConnectionExecutor`).
    public var executor: ConnectionExecutor { runner.core.executor }

    /// The connection's health now (`ConnectionHealth`: state, time online, invocation round
    /// trips, how long the last dead link took to notice, reconnects and their reasons, resumes,
    /// traffic, messages awaiting acknowledgement, the transport).
    public func health() async -> ConnectionHealth {
        await runner.core.health()
    }

    /// The health now and then every `interval`, for a dashboard (ends when the connection is gone).
    public func healthUpdates(every interval: Duration) -> AsyncStream<ConnectionHealth> {
        runner.core.healthUpdates(every: interval)
    }

    /// The state now.
    public func state() async -> HubConnectionMachine.StateName {
        let runner = runner
        return await runner.core.call { $0.resume(returning: runner.core.machine.stateName) }
    }

    /// The transport of the current connection (nil unless connected, resuming or opening one).
    public func transport() async -> HubTransport? {
        let runner = runner
        return await runner.core.call { $0.resume(returning: runner.core.machine.transport) }
    }

    /// The current connection id (nil unless connected after a negotiation).
    public func connectionId() async -> String? {
        let runner = runner
        return await runner.core.call { $0.resume(returning: runner.core.machine.connectionId) }
    }

    /// Calls `handler` on `queue` (default `Options.callbackQueue`) with every event from now on,
    /// replacing an earlier handler. (`onConnected`, `onReconnected` and the like add handlers of
    /// their own, beside this one.)
    public func setEventHandler(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (Event) -> Void) {
        let queue = queue ?? callbackQueue
        runner.core.queue.async { [runner] in runner.core.events.setHandler(queue: queue, handler) }
    }

    /// Also calls `handler` on `queue` with every event from now on.
    private func observe(queue: DispatchQueue?, _ handler: @escaping @Sendable (Event) -> Void) {
        let queue = queue ?? callbackQueue
        runner.core.queue.async { [runner] in runner.core.events.addObserver(queue: queue, handler) }
    }

    /// Calls `handler` when `start()` connects.
    public func onConnected(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (String?) -> Void) {
        observe(queue: queue) { event in
            if case .connected(let connectionId, _) = event { handler(connectionId) }
        }
    }

    /// Calls `handler` when the connection is lost and the reconnect policy starts (once per loss,
    /// as the official clients' `onreconnecting`; the event handler also sees every further attempt).
    public func onReconnecting(
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (HubConnectionError?) -> Void
    ) {
        observe(queue: queue) { event in
            if case .reconnecting(let error, attempt: 1, _) = event { handler(error) }
        }
    }

    /// Calls `handler` after a reconnect (the place to re-join groups).
    public func onReconnected(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (String?) -> Void) {
        observe(queue: queue) { event in
            if case .reconnected(let connectionId, _) = event { handler(connectionId) }
        }
    }

    /// Calls `handler` when the reconnect policy gives up (with the last attempt's error): the
    /// place to offer "retry", which calls `reconnectNow()`.
    public func onSuspended(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (HubConnectionError?) -> Void) {
        observe(queue: queue) { event in
            if case .suspended(let error) = event { handler(error) }
        }
    }

    /// Calls `handler` when the connection closes for good (nil after `stop()`).
    public func onClosed(queue: DispatchQueue? = nil, _ handler: @escaping @Sendable (HubConnectionError?) -> Void) {
        observe(queue: queue) { event in
            if case .closed(let error) = event { handler(error) }
        }
    }

    /// Every event from now on (several streams may be open; each ends when the connection is
    /// released). Events are buffered until read.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        runner.core.queue.async { [runner] in runner.core.events.addStream(continuation) }
        return stream
    }

    // MARK: - Server → client

    /// Handles the server's invocations of `target` with `handler` (on `queue`, default
    /// `Options.callbackQueue`), its arguments decoded as the handler's parameter types. Arguments
    /// beyond those are ignored; an invocation with fewer, or with values that do not decode, is
    /// logged at `error` and not handled. Several handlers of one target are all called.
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
        let entry = InvocationHandler(queue: queue ?? callbackQueue, call: handler)
        runner.core.queue.async { [runner] in runner.addHandler(target, entry) }
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
        runner.core.queue.async { [runner] in runner.setResultHandler(target, entry) }
    }

    /// Removes every handler of `target` (later invocations are unhandled: logged, and answered
    /// with an error when they expect a result).
    public func off(_ target: String) {
        runner.core.queue.async { [runner] in runner.removeHandlers(target) }
    }

    // MARK: - Client → server

    /// Invokes the hub method `method` with any `Encodable` arguments and returns its result
    /// decoded as `Result`. Throws `invocationFailed` with the server's text when the method
    /// failed, `canceled` when the connection closed first or the calling task was canceled (the
    /// server still runs the method; its result is dropped), `notConnected`, or `encoding`.
    public func invoke<Result: Decodable, each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) -> Result {
        let encoded = try encode(repeat each arguments)
        return try Self.decodeResult(await invoke(method, arguments: encoded), method: method, encoding: encoding)
    }

    /// Invokes the hub method `method` and waits for it to complete (its result, if any, is
    /// ignored).
    public func invoke<each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) {
        _ = try await invoke(method, arguments: encode(repeat each arguments))
    }

    /// Invokes `method` with already encoded arguments (in this connection's encoding) and returns
    /// the encoded result (nil for a void method).
    public func invoke(_ method: String, arguments: EncodedArguments) async throws(HubConnectionError) -> EncodedValue?
    {
        try await invoke(method, arguments: arguments, upload: nil)
    }

    /// Invokes `method` with a client→server stream: the items of `upload` are sent as they come
    /// (the method's stream parameter, after the other arguments), its end or error ends the
    /// stream. Returns the method's result.
    public func invoke<Result: Decodable, Upload: AsyncSequence & Sendable, each Argument: Encodable>(
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

    private func invoke(
        _ method: String,
        arguments: EncodedArguments,
        upload: UploadPump?
    ) async throws(HubConnectionError) -> EncodedValue? {
        let call = Call()
        let runner = runner
        let result: Swift.Result<CompletionResult, HubConnectionError> = await runner.core.call(
            { runner.invoke(method, arguments: arguments, upload: upload, call: call, $0) },
            onCancel: { runner.cancel(call) }
        )
        switch try result.get() {
        case .void: return nil
        case .value(let value): return value
        case .error(let text):
            throw HubConnectionError(
                text == HubConnectionError.invocationCanceled.message ? .canceled : .invocationFailed,
                text
            )
        }
    }

    /// Calls `method` without waiting for it (a non-blocking invocation); returns once the message
    /// is handed to the transport. While the stateful-reconnect buffer is full it waits for room;
    /// canceling the calling task then throws `canceled` at once, and the message is not sent.
    public func send<each Argument: Encodable>(
        _ method: String,
        _ arguments: repeat each Argument
    ) async throws(HubConnectionError) {
        try await send(method, arguments: encode(repeat each arguments), upload: nil)
    }

    /// Calls `method` without waiting for it, with already encoded arguments.
    public func send(_ method: String, arguments: EncodedArguments) async throws(HubConnectionError) {
        try await send(method, arguments: arguments, upload: nil)
    }

    /// Calls `method` without waiting for it, with a client→server stream fed from `upload`.
    public func send<Upload: AsyncSequence & Sendable, each Argument: Encodable>(
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
        let call = Call()
        let runner = runner
        let result: Result<Void, HubConnectionError> = await runner.core.call(
            { runner.send(method, arguments: arguments, upload: upload, call: call, $0) },
            onCancel: { runner.cancel(call) }
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
                return try value.decode(Item.self)
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
        let runner = runner
        continuation.onTermination = { termination in
            guard case .cancelled = termination else { return }
            runner.core.queue.async { runner.consumerLeft(sink) }
        }
        runner.core.queue.async { runner.stream(method, arguments: arguments, sink: sink) }
    }

    // MARK: - Encoding

    private func encode<each Argument: Encodable>(
        _ arguments: repeat each Argument
    ) throws(HubConnectionError) -> EncodedArguments {
        do {
            return try EncodedArguments(encoding: encoding, repeat each arguments)
        } catch {
            throw HubConnectionError(.encoding, "The arguments cannot be encoded: \(error)")
        }
    }

    static func decodeResult<Result: Decodable>(
        _ value: EncodedValue?,
        method: String,
        encoding: ValueEncoding
    ) throws(HubConnectionError) -> Result {
        do {
            return try (value ?? .null(encoding)).decode(Result.self)
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
