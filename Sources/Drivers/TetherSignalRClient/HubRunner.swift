import Dispatch
import TetherCore
import TetherDispatch
import TetherSignalR

/// The SignalR part of a `HubConnection`'s runner: how `HubConnectionMachine`'s actions are
/// carried out (access tokens from the app's provider, negotiate requests and WebSockets, one per
/// transport generation, over the options' byte transports), the handlers of server calls, and
/// the calls that wait for something the protocol answers (start, stop, invocations, streams,
/// commands waiting for room). The queue, the timer, the action loop and event delivery are the
/// shared `ConnectionRunner`'s (`Specs/machine-contract.md`, "The runner").
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `core.queue`.
final class HubRunner: @unchecked Sendable {
    let core: ConnectionRunner<HubConnectionMachine, HubConnection.Event>
    let options: HubConnection.Options
    let encoding: ValueEncoding
    let transferFormat: TransferFormat
    /// The hub protocol's largest message, also the largest WebSocket message.
    let maximumMessageSize: Int
    private let accessTokenProvider: (@Sendable () async throws -> String?)?
    private let log: ConnectionLog
    private var queue: DispatchQueue { core.queue }

    private var negotiations: [TransportGeneration: HTTPExchange] = [:]
    private var transports: [TransportGeneration: any HubTransportConnection] = [:]
    /// Whether the current run (since `start`) connected: a failed `start()` throws to its caller
    /// and announces no `closed`.
    private var hasConnected = false

    // Handlers, by lower-cased target.
    private var handlers: [String: [HubConnection.InvocationHandler]] = [:]
    private var resultHandlers: [String: HubConnection.ResultHandler] = [:]

    // Waiters.
    private var startWaiters: [Handoff<Result<Void, HubConnectionError>>] = []
    private var stopWaiters: [Handoff<Void>] = []
    private var completionWaiters: [String: Handoff<Result<CompletionResult, HubConnectionError>>] = [:]
    private var streamSinks: [String: HubConnection.StreamSink] = [:]
    /// Commands refused with `sendBufferFull`, retried in order at `sendBufferAvailable`.
    private var blocked = BlockedCommands<HubConnectionMachine, HubConnectionError>()

    init(
        configuration: HubConnectionMachine.Configuration,
        hubProtocol: AnyHubProtocol,
        options: HubConnection.Options,
        accessTokenProvider: (@Sendable () async throws -> String?)?
    ) {
        self.options = options
        self.accessTokenProvider = accessTokenProvider
        encoding = hubProtocol.valueEncoding
        transferFormat = hubProtocol.transferFormat
        maximumMessageSize = hubProtocol.maximumMessageSize
        log = ConnectionLog(level: options.logLevel, handler: options.logHandler)
        core = ConnectionRunner(
            label: "tether.hub-connection",
            machine: HubConnectionMachine(
                configuration: configuration,
                hubProtocol: hubProtocol,
                randomSeed: options.randomSeed ?? UInt64.random(in: 0...UInt64.max)
            )
        )
        core.bind(
            perform: { [unowned self] action in perform(action) },
            // Commands waiting for room go when there is some (the stateful buffer acknowledged,
            // the network took what it held, a new transport).
            afterDrain: { [unowned self] in
                if !blocked.isEmpty { blocked.retry(on: &core.machine, now: now) { $0.kind == .sendBufferFull } }
            }
        )
        core.completeHealth = { [unowned self] health in
            health.tlsVersion = core.machine.currentGeneration.flatMap { transports[$0]?.tlsVersion }
            health.unsentBytes = unsentByteCount
        }
    }

    private var now: Instant { core.now() }

    private func drive() {
        core.drive()
    }

    // MARK: - Commands (on `queue`)

    func start(_ continuation: Handoff<Result<Void, HubConnectionError>>) {
        switch core.machine.stateName {
        case .connected, .resuming:
            // Resuming under stateful reconnect is the same connection, still usable.
            return continuation.resume(returning: .success(()))
        case .disconnected:
            startWaiters.append(continuation)
            hasConnected = false
            log.info("Starting the connection to \(HubLog.redacted(core.machine.configuration.url)).")
            core.machine.start(now: now)
            drive()
        case .suspended:
            startWaiters.append(continuation)
            log.info("Starting again after the reconnect policy gave up.")
            core.machine.reconnectNow(now: now)
            drive()
        case .fetchingAccessToken, .negotiating, .connectingTransport, .handshaking, .reconnectWaiting:
            startWaiters.append(continuation)
        }
    }

    func reconnectNow() {
        core.machine.reconnectNow(now: now)
        drive()
    }

    func networkChanged(_ path: NetworkPath) {
        log.debug("Network: \(path).")
        core.machine.networkChanged(path, now: now)
        drive()
    }

    func applicationStateChanged(_ application: ApplicationState) {
        log.debug("Application: \(application.rawValue).")
        core.machine.applicationStateChanged(application, now: now)
        drive()
    }

    /// The task awaiting `start()` was canceled: the attempt is abandoned (the machine stops) and
    /// the waiting `start()` calls throw `canceled`. Nothing happens once connected.
    func cancelStart() {
        guard !startWaiters.isEmpty, core.machine.stateName != .connected else { return }
        let waiters = startWaiters
        startWaiters.removeAll()
        for waiter in waiters {
            waiter.resume(returning: .failure(HubConnectionError(.canceled, "The start's task was canceled.")))
        }
        core.machine.stop(now: now)
        drive()
    }

    func stop(_ continuation: Handoff<Void>) {
        guard core.machine.stateName != .disconnected else { return continuation.resume() }
        stopWaiters.append(continuation)
        log.info("Stopping the connection.")
        core.machine.stop(now: now)
        drive()
    }

    /// Runs `body` on the machine now, then carries out its actions.
    func perform<Value>(
        _ body: (inout HubConnectionMachine, Instant) throws(HubConnectionError) -> Value
    ) -> Result<Value, HubConnectionError> {
        let result: Result<Value, HubConnectionError>
        do throws(HubConnectionError) {
            result = .success(try body(&core.machine, now))
        } catch {
            result = .failure(error)
        }
        drive()
        return result
    }

    /// Runs `command`; when the stateful-reconnect buffer is full, or the transport holds more
    /// than `maximumUnsentBytes` the network has not taken (or earlier commands wait for room), it
    /// waits its turn, and `fail` is called if it cannot run.
    func submit(
        _ command: @escaping (inout HubConnectionMachine, Instant) throws(HubConnectionError) -> Void,
        call: HubConnection.Call? = nil,
        fail: @escaping (HubConnectionError) -> Void
    ) {
        let command = BlockedCommands<HubConnectionMachine, HubConnectionError>.Command(
            run: { [unowned self] machine, now throws(HubConnectionError) in
                try checkNetworkRoom()
                try command(&machine, now)
            },
            fail: fail,
            call: call
        )
        let waits = blocked.submit(command, on: &core.machine, now: now, backPressure: options.backPressure) {
            $0.kind == .sendBufferFull
        }
        if waits {
            if let reason = options.networkFullReason(unsent: unsentByteCount) {
                log.debug("\(reason) A command waits for room.")
            } else {
                log.debug("The stateful-reconnect buffer is full: a command waits for room.")
            }
        }
        drive()
    }

    /// The bytes sent that the network has not taken yet, over every open transport.
    private var unsentByteCount: Int { transports.values.reduce(0) { $0 + $1.unsentByteCount } }

    /// Throws `sendBufferFull` while the transports hold more than `maximumUnsentBytes`.
    private func checkNetworkRoom() throws(HubConnectionError) {
        if let reason = options.networkFullReason(unsent: unsentByteCount) {
            throw HubConnectionError(.sendBufferFull, reason)
        }
    }

    /// Invokes; the completion goes to `continuation` (unless `call` is canceled first).
    func invoke(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump?,
        call: HubConnection.Call,
        _ continuation: Handoff<Result<CompletionResult, HubConnectionError>>
    ) {
        guard !call.isCanceled else { return continuation.resume(returning: .failure(.canceledByTask)) }
        submit(
            { [self] (machine, now) throws(HubConnectionError) in
                let streamIds = try upload.map { _ throws(HubConnectionError) in
                    [try machine.makeUploadStream(now: now)]
                }
                let id = try machine.invoke(target, arguments: arguments, streamIds: streamIds ?? [], now: now)
                completionWaiters[id] = continuation
                call.invocationId = id
                if let upload, let streamId = streamIds?.first { startUpload(upload, streamId: streamId) }
            },
            call: call,
            fail: { continuation.resume(returning: .failure($0)) }
        )
    }

    /// The task awaiting `call` (an invocation, or a send waiting for room) was canceled: it
    /// fails at once with `canceled`. An invocation already sent is not canceled on the server
    /// (SignalR has no such message for invocations, as with the official clients); its
    /// completion, when it comes, is dropped.
    func cancel(_ call: HubConnection.Call) {
        call.isCanceled = true
        if let id = call.invocationId {
            completionWaiters.removeValue(forKey: id)?.resume(returning: .failure(.canceledByTask))
        } else {
            _ = blocked.cancel(call, with: .canceledByTask)
        }
    }

    /// Sends (no completion); `continuation` learns whether it was sent (unless `call` is
    /// canceled while it waits for room).
    func send(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump?,
        call: HubConnection.Call,
        _ continuation: Handoff<Result<Void, HubConnectionError>>
    ) {
        guard !call.isCanceled else { return continuation.resume(returning: .failure(.canceledByTask)) }
        submit(
            { [self] (machine, now) throws(HubConnectionError) in
                let streamIds = try upload.map { _ throws(HubConnectionError) in
                    [try machine.makeUploadStream(now: now)]
                }
                try machine.send(target, arguments: arguments, streamIds: streamIds ?? [], now: now)
                if let upload, let streamId = streamIds?.first { startUpload(upload, streamId: streamId) }
                continuation.resume(returning: .success(()))
            },
            call: call,
            fail: { continuation.resume(returning: .failure($0)) }
        )
    }

    /// Starts a server→client stream whose items go to `sink`.
    func stream(_ target: String, arguments: EncodedArguments, sink: HubConnection.StreamSink) {
        submit(
            { [self] (machine, now) throws(HubConnectionError) in
                let id = try machine.stream(target, arguments: arguments, now: now)
                if sink.consumerLeft { return try machine.cancelStream(id, now: now) }
                sink.invocationId = id
                streamSinks[id] = sink
            },
            fail: { sink.finish($0) }
        )
    }

    /// The consumer of a stream stopped iterating: cancel the stream on the server.
    func consumerLeft(_ sink: HubConnection.StreamSink) {
        guard let id = sink.invocationId else {
            sink.consumerLeft = true
            return
        }
        guard streamSinks.removeValue(forKey: id) != nil else { return }
        _ = perform { (machine, now) throws(HubConnectionError) in try machine.cancelStream(id, now: now) }
    }

    /// Feeds an upload stream from its sequence: each item is encoded on the caller's task and
    /// sent here in order; the sequence's end (or error) completes the stream.
    private func startUpload(_ upload: HubConnection.UploadPump, streamId: String) {
        let send: HubConnection.UploadPump.Send = { [weak self] item in
            guard let self else { return .failure(HubConnectionError(.notConnected, "The connection was released.")) }
            return await awaitHandoff { continuation in
                self.queue.async {
                    self.submit(
                        { (machine, now) throws(HubConnectionError) in
                            switch item {
                            case .item(let value): try machine.sendStreamItem(streamId, item: value, now: now)
                            case .end(let error): try machine.completeUploadStream(streamId, error: error, now: now)
                            }
                            continuation.resume(returning: .success(()))
                        },
                        fail: { continuation.resume(returning: .failure($0)) }
                    )
                }
            }
        }
        upload.run(send)
    }

    /// Answers a server invocation (a client result).
    func reply(_ invocationId: String, result: CompletionResult) {
        submit(
            { (machine, now) throws(HubConnectionError) in try machine.reply(to: invocationId, result: result, now: now)
            },
            fail: { [log] error in
                log.warning("The client result for invocation \(invocationId) was not sent: \(error)")
            }
        )
    }

    func addHandler(_ target: String, _ handler: HubConnection.InvocationHandler) {
        handlers[target.lowercased(), default: []].append(handler)
        core.machine.handle(target)
    }

    func setResultHandler(_ target: String, _ handler: HubConnection.ResultHandler) {
        resultHandlers[target.lowercased()] = handler
        core.machine.handle(target)
    }

    func removeHandlers(_ target: String) {
        handlers[target.lowercased()] = nil
        resultHandlers[target.lowercased()] = nil
        core.machine.stopHandling(target)
    }

    /// The connection is gone: close everything without events (the block keeps the runner alive
    /// until it has run).
    func shutDown() {
        queue.async { [self] in closeEverything() }
    }

    private func closeEverything() {
        core.shutDown()
        for request in negotiations.values { request.cancel() }
        negotiations.removeAll()
        for transport in transports.values { transport.close() }
        transports.removeAll()
        for sink in streamSinks.values {
            sink.finish(HubConnectionError(.notConnected, "The connection was released."))
        }
        streamSinks.removeAll()
    }

    // MARK: - The loop

    /// Carries out one of the machine's actions.
    private func perform(_ action: HubConnectionMachine.Action) {
        switch action {
        case .fetchAccessToken(let generation):
            fetchAccessToken(generation: generation)
        case .sendNegotiate(let url, let headers, let generation):
            guard let parsed = HubURL(url) else {
                core.machine.negotiateFailed(
                    "The URL '\(HubLog.redacted(url))' is not an absolute http(s) URL.",
                    generation: generation,
                    now: now
                )
                return
            }
            log.debug("Sending the negotiate request to \(HubLog.redacted(url)).")
            var status = 0
            var body: [UInt8] = []
            negotiations[generation] = HTTPExchange(
                method: "POST",
                url: parsed,
                headers: headers,
                queue: queue,
                options: options
            ) {
                [weak self] event in
                switch event {
                case .started(let code, _):
                    status = code
                case .body(let bytes):
                    body += bytes
                    if body.count > Self.maximumNegotiateSize {
                        self?.negotiated(
                            .failed("the response is larger than \(Self.maximumNegotiateSize) bytes"),
                            generation: generation
                        )
                    }
                case .ended:
                    self?.negotiated(.response(status: status, body: body), generation: generation)
                case .failed(let reason, _):
                    self?.negotiated(.failed(reason), generation: generation)
                case .certificateRefused(let reason):
                    self?.negotiated(.certificateRefused(reason), generation: generation)
                }
            }
        case .openTransport(let transport, let url, let headers, let generation):
            guard let parsed = HubURL(url) else {
                core.machine.transportClosed(
                    generation: generation,
                    error: "The URL '\(HubLog.redacted(url))' is not an absolute URL.",
                    now: now
                )
                return
            }
            log.debug("Opening the \(transport) transport to \(HubLog.redacted(url)).")
            let onEvent: (HubTransportEvent) -> Void = { [weak self] event in
                self?.transportEvent(event, generation: generation)
            }
            switch transport {
            case .webSockets:
                transports[generation] = WebSocketTransport(
                    url: parsed,
                    headers: headers,
                    queue: queue,
                    options: options,
                    maximumMessageSize: maximumMessageSize,
                    onEvent: onEvent
                )
            case .serverSentEvents, .longPolling:
                transports[generation] = HTTPHubTransport(
                    transport == .serverSentEvents ? .serverSentEvents : .longPolling,
                    url: parsed,
                    urlText: url,
                    headers: headers,
                    format: transferFormat,
                    queue: queue,
                    options: options,
                    maximumMessageSize: maximumMessageSize,
                    onEvent: onEvent
                )
            }
        case .send(let bytes, let format, let generation):
            log.trace { "Sending \(HubLog.describe(bytes, format: format))" }
            transports[generation]?.send(bytes, format: format)
        case .closeTransport(let generation):
            transports.removeValue(forKey: generation)?.close()
            negotiations.removeValue(forKey: generation)?.cancel()
        case .event(let event):
            deliver(event)
        }
    }

    private func fetchAccessToken(generation: TransportGeneration) {
        guard let provider = accessTokenProvider else {
            return core.machine.accessTokenFetched(nil, generation: generation, now: now)
        }
        Task { [weak self] in
            let outcome: Result<String?, any Error>
            do {
                outcome = .success(try await provider())
            } catch {
                outcome = .failure(error)
            }
            guard let self else { return }
            queue.async {
                switch outcome {
                case .success(let token):
                    self.core.machine.accessTokenFetched(token, generation: generation, now: self.now)
                case .failure(let error):
                    // The provider's error text is the app's; it is not expected to hold the token.
                    self.core.machine.accessTokenFailed(
                        "The access token provider failed: \(error)",
                        generation: generation,
                        now: self.now
                    )
                }
                self.drive()
            }
        }
    }

    /// The largest negotiate response read (it is a few hundred bytes).
    static let maximumNegotiateSize = 1 << 20

    enum NegotiateOutcome {
        case response(status: Int, body: [UInt8])
        case failed(String)
        case certificateRefused(String)
    }

    private func negotiated(_ outcome: NegotiateOutcome, generation: TransportGeneration) {
        guard let exchange = negotiations.removeValue(forKey: generation) else { return }
        exchange.cancel()
        switch outcome {
        case .response(let status, let body):
            log.debug("Negotiate answered \(status).")
            core.machine.negotiateResponse(status: status, body: body, generation: generation, now: now)
        case .failed(let reason):
            core.machine.negotiateFailed(reason, generation: generation, now: now)
        case .certificateRefused(let reason):
            log.debug("The certificate was refused: \(reason)")
            core.machine.certificateRefused(generation: generation, reason: reason, now: now)
        }
        drive()
    }

    private func transportEvent(_ event: HubTransportEvent, generation: TransportGeneration) {
        guard transports[generation] != nil else { return }
        switch event {
        case .opened:
            log.debug("The \(core.machine.transport ?? .webSockets) transport is open.")
            core.machine.transportConnected(generation: generation, now: now)
        case .message(let bytes):
            log.trace { "Received \(HubLog.describe(bytes, format: self.encoding == .json ? .text : .binary))" }
            core.machine.transportReceived(bytes, generation: generation, now: now)
        case .certificateRefused(let reason):
            transports.removeValue(forKey: generation)
            log.debug("The certificate was refused: \(reason)")
            core.machine.certificateRefused(generation: generation, reason: reason, now: now)
        case .unauthorized:
            transports.removeValue(forKey: generation)
            log.debug("Opening the transport was answered 401.")
            core.machine.transportUnauthorized(generation: generation, now: now)
        case .closed(let error):
            transports.removeValue(forKey: generation)
            log.debug("The transport closed\(error.map { ": \($0)" } ?? ".")")
            core.machine.transportClosed(generation: generation, error: error, now: now)
        case .drained:
            break  // the drive's retry of waiting commands follows
        }
        drive()
    }

    // MARK: - Events

    private func deliver(_ event: HubConnectionMachine.Event) {
        switch event {
        case .connected(let connectionId, let transport):
            hasConnected = true
            log.info("Connected over \(transport)\(connectionId.map { " (connection id \($0))" } ?? "").")
            let waiters = startWaiters
            startWaiters.removeAll()
            announce(.connected(connectionId: connectionId, transport: transport)) {
                for waiter in waiters { waiter.resume(returning: .success(())) }
            }
        case .reconnecting(let error, let attempt, let delay):
            if attempt == 1 {
                log.warning("The connection was lost\(error.map { ": \($0)" } ?? ""); reconnecting in \(delay).")
            } else {
                let reason = error.map { " (the last one failed: \($0))" } ?? ""
                log.info("Reconnect attempt \(attempt) in \(delay)\(reason).")
            }
            announce(.reconnecting(error, attempt: attempt, delay: delay))
        case .waitingForNetwork:
            log.info("No network: reconnecting when it is back.")
            announce(.waitingForNetwork)
        case .reconnected(let connectionId, let transport):
            log.info("Reconnected over \(transport)\(connectionId.map { " (connection id \($0))" } ?? "").")
            let waiters = startWaiters
            startWaiters.removeAll()
            announce(.reconnected(connectionId: connectionId, transport: transport)) {
                for waiter in waiters { waiter.resume(returning: .success(())) }
            }
        case .suspended(let error):
            log.error("The reconnect policy gave up\(error.map { ": \($0)" } ?? ""); reconnectNow() starts again.")
            let waiters = startWaiters
            startWaiters.removeAll()
            let failure = error ?? HubConnectionError(.transport, "The reconnect policy gave up.")
            announce(.suspended(error)) {
                for waiter in waiters { waiter.resume(returning: .failure(failure)) }
            }
        case .closed(let error):
            if !hasConnected {
                log.debug("The connection could not be started: \(error.map { "\($0)" } ?? "stopped").")
            } else if let error {
                log.error("The connection closed: \(error)")
            } else {
                log.info("The connection closed.")
            }
            closed(error)
        case .invocation(let message, let handler):
            invoked(message, handler: handler)
        case .unhandledInvocation(let message):
            log.warning("No client method with the name '\(message.target)' found.")
        case .completion(let invocationId, let result):
            completionWaiters.removeValue(forKey: invocationId)?.resume(returning: .success(result))
        case .streamItem(let invocationId, let item):
            if let sink = streamSinks[invocationId], !sink.yield(item) {
                // The item did not decode (the consumer has the error): cancel on the server.
                streamSinks[invocationId] = nil
                queue.async { [self] in
                    _ = perform { (machine, now) throws(HubConnectionError) in
                        try machine.cancelStream(invocationId, now: now)
                    }
                }
            }
        case .streamCompleted(let invocationId, let error):
            streamSinks.removeValue(forKey: invocationId)?.finish(
                error.map { HubConnectionError(.invocationFailed, $0) }
            )
        case .sendBufferAvailable:
            blocked.retry(on: &core.machine, now: now) { $0.kind == .sendBufferFull }
        }
    }

    private func closed(_ error: HubConnectionError?) {
        let failure = error ?? HubConnectionError(.notConnected, "The connection was stopped.")
        // Pending invocations were completed by the machine; anything left is failed here.
        for waiter in completionWaiters.values { waiter.resume(returning: .failure(failure)) }
        completionWaiters.removeAll()
        for sink in streamSinks.values { sink.finish(failure) }
        streamSinks.removeAll()
        blocked.failAll(failure)
        for request in negotiations.values { request.cancel() }
        negotiations.removeAll()
        let startWaiters = startWaiters
        let stopWaiters = stopWaiters
        self.startWaiters.removeAll()
        self.stopWaiters.removeAll()
        let resumeWaiters: @Sendable () -> Void = {
            for waiter in startWaiters { waiter.resume(returning: .failure(failure)) }
            for waiter in stopWaiters { waiter.resume() }
        }
        if hasConnected {
            announce(.closed(error), then: resumeWaiters)
        } else {
            resumeWaiters()
        }
        hasConnected = false
    }

    /// Tells the app (event handler, observers, streams); `then` runs (on the queue) once every
    /// handler has run, so that a caller returning from `start()` or `stop()` finds its callbacks
    /// done.
    private func announce(_ event: HubConnection.Event, then: (@Sendable () -> Void)? = nil) {
        core.events.deliver(event, then: then)
    }

    private func invoked(_ message: InvocationMessage, handler name: String) {
        let key = name.lowercased()
        for handler in handlers[key] ?? [] {
            handler.queue.async { [log] in
                do {
                    try handler.call(message.arguments)
                } catch {
                    log.error("The handler of '\(message.target)' could not take the arguments: \(error)")
                }
            }
        }
        guard let invocationId = message.invocationId else { return }
        guard let resultHandler = resultHandlers[key] else {
            return reply(invocationId, result: .error("Client didn't provide a result."))
        }
        let encoding = encoding
        Task { [weak self] in
            let result: CompletionResult
            do {
                result = .value(try await resultHandler.call(message.arguments, encoding))
            } catch {
                result = .error("\(error)")
            }
            guard let self else { return }
            queue.async { self.reply(invocationId, result: result) }
        }
    }
}
