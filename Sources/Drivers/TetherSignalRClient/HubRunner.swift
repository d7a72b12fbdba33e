import Dispatch
@_spi(TetherInternal) import TetherCore
@_spi(TetherInternal) import TetherDispatch
import TetherSignalR

/// What SignalR adds to the generic `ConnectionRunner` (which carries out every transport action,
/// the lifecycle and its waiters, back-pressure, the device inputs and health): its own requests
/// (access tokens from the app's provider, the negotiate request), the handlers of server calls,
/// and the calls only SignalR has: invocations awaiting their completion, streams, uploads and
/// client results.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `runner.queue`.
final class HubRunner: ConnectionProtocolPart, @unchecked Sendable {
    let runner: ConnectionRunner<HubConnectionMachine, HubConnection.Event>
    let encoding: ValueEncoding
    let transferFormat: TransferFormat
    private let accessTokenProvider: (@Sendable () async throws -> String?)?
    private var queue: DispatchQueue { runner.queue }
    private var log: ConnectionLog { runner.log }

    private var negotiations: [TransportGeneration: HTTPExchange] = [:]

    // Handlers, by lower-cased target.
    private var handlers: [String: [HubConnection.InvocationHandler]] = [:]
    private var resultHandlers: [String: HubConnection.ResultHandler] = [:]

    /// Who waits for an invocation's completion: a task (`invoke` awaited), or a completion run as
    /// a job of the executor (`invoke(_:arguments:completion:)`).
    private enum CompletionWaiter {
        case task(Handoff<Result<EncodedValue?, HubConnectionError>>)
        case completion(@Sendable (Result<EncodedValue?, HubConnectionError>) -> Void)
    }

    // Waiters.
    @exclusivity(unchecked) private var completionWaiters: [String: CompletionWaiter] = [:]
    private var streamSinks: [String: HubConnection.StreamSink] = [:]

    init(
        configuration: HubConnectionMachine.Configuration,
        hubProtocol: AnyHubProtocol,
        options: HubConnection.Options,
        accessTokenProvider: (@Sendable () async throws -> String?)?
    ) {
        self.accessTokenProvider = accessTokenProvider
        encoding = hubProtocol.valueEncoding
        transferFormat = hubProtocol.transferFormat
        runner = ConnectionRunner(
            label: "tether.hub-connection",
            machine: HubConnectionMachine(
                configuration: configuration,
                hubProtocol: hubProtocol,
                randomSeed: options.machineSeed
            ),
            options: options,
            lifecycleEvent: HubConnection.Event.lifecycle
        )
        runner.bind(self)
    }

    // MARK: - The runner's calls (ConnectionProtocolPart)

    func closeRequests(of generation: TransportGeneration) {
        negotiations.removeValue(forKey: generation)?.cancel()
    }

    func queueFull() {
        log.debug("The stateful-reconnect buffer is full: a command waits for room.")
    }

    func describe(_ bytes: [UInt8]) -> String {
        HubLog.describe(bytes, format: transferFormat)
    }

    func shutDown() {
        for request in negotiations.values { request.cancel() }
        negotiations.removeAll()
        closed(HubConnectionError(.notConnected, "The connection was released."))
    }

    private var now: Instant { runner.now() }

    // MARK: - Commands (on the queue)

    /// Runs `command`, waiting for room as `Options.backPressure` says; `fail` is called if it
    /// cannot run. `writingAtOnce`: as `ConnectionRunner.submit` (for an invocation awaited).
    func submit(
        _ command: @escaping (inout HubConnectionMachine, Instant) throws(HubConnectionError) -> Void,
        call: RunnerCall? = nil,
        writingAtOnce: Bool = false,
        fail: @escaping (HubConnectionError) -> Void
    ) {
        runner.submit(.init(run: command, fail: fail, call: call), writingAtOnce: writingAtOnce)
    }

    /// Invokes; the completion goes to `handoff` (unless its call is canceled first). At once
    /// when nothing waits for room (no command built), else as a command that waits.
    func invoke(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump?,
        _ handoff: Handoff<Result<EncodedValue?, HubConnectionError>>
    ) {
        let call = handoff.call
        let failure = runner.runForCompletion(
            call: call,
            { machine, now throws(HubConnectionError) in
                try invoke(
                    target,
                    arguments: arguments,
                    upload: upload,
                    on: &machine,
                    now: now,
                    to: .task(handoff),
                    call: call
                )
            },
            later: {
                .init(
                    run: { [self] machine, now throws(HubConnectionError) in
                        try invoke(
                            target,
                            arguments: arguments,
                            upload: upload,
                            on: &machine,
                            now: now,
                            to: .task(handoff),
                            call: call
                        )
                    },
                    fail: { handoff.resume(returning: .failure($0)) },
                    call: call
                )
            }
        )
        if let failure { handoff.resume(returning: .failure(failure)) }
    }

    /// Invokes; the completion goes to `completion`, run as a job of the executor.
    func invoke(
        _ target: String,
        arguments: EncodedArguments,
        completion: @escaping @Sendable (Result<EncodedValue?, HubConnectionError>) -> Void
    ) {
        let executor = runner.executor
        let failure = runner.runForCompletion(
            { machine, now throws(HubConnectionError) in
                try invoke(target, arguments: arguments, on: &machine, now: now, to: .completion(completion))
            },
            later: {
                .init(
                    run: { [self] machine, now throws(HubConnectionError) in
                        try invoke(target, arguments: arguments, on: &machine, now: now, to: .completion(completion))
                    },
                    fail: { error in executor.perform { completion(.failure(error)) } }
                )
            }
        )
        if let failure { executor.perform { completion(.failure(failure)) } }
    }

    /// Invokes on the machine (with `upload`'s stream, started once the invocation is queued);
    /// the completion goes to `waiter` (the id noted in `call`, for its cancellation).
    private func invoke(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump? = nil,
        on machine: inout HubConnectionMachine,
        now: Instant,
        to waiter: CompletionWaiter,
        call: RunnerCall? = nil
    ) throws(HubConnectionError) {
        let streamId = try upload.map { _ throws(HubConnectionError) in try machine.makeUploadStream(now: now) }
        let id = try machine.invoke(target, arguments: arguments, streamIds: streamId.map { [$0] } ?? [], now: now)
        completionWaiters[id] = waiter
        call?.id = id
        if let upload, let streamId { startUpload(upload, streamId: streamId) }
    }

    /// Hands `result` to `waiter`: a task at once, a completion as a job of the executor.
    private func complete(_ waiter: CompletionWaiter, with result: Result<EncodedValue?, HubConnectionError>) {
        switch waiter {
        case .task(let handoff): handoff.resume(returning: result)
        case .completion(let completion): runner.executor.perform { completion(result) }
        }
    }

    /// The task awaiting `call` (an invocation, or a send waiting for room) was canceled: it
    /// fails at once with `canceled`. An invocation already sent is not canceled on the server
    /// (SignalR has no such message for invocations, as with the official clients); its
    /// completion, when it comes, is dropped.
    func cancel(_ call: RunnerCall) {
        if runner.cancelWaitingCommand(call) { return }
        guard let id = call.id, case .task(let handoff)? = completionWaiters[id] else { return }
        completionWaiters[id] = nil
        handoff.resume(returning: .failure(.canceledByTask))
    }

    /// Sends (no completion); `handoff` learns whether it was sent (unless its call is canceled
    /// while it waits for room).
    func send(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump?,
        _ handoff: Handoff<Result<Void, HubConnectionError>>
    ) {
        let call = handoff.call
        // At once when nothing waits for room (no command built), else as a command that waits;
        // written with the executor job's other sends (not at once).
        let failure = runner.runForCompletion(
            call: call,
            writingAtOnce: false,
            { machine, now throws(HubConnectionError) in
                try send(target, arguments: arguments, upload: upload, on: &machine, now: now, handoff)
            },
            later: {
                .init(
                    run: { [self] machine, now throws(HubConnectionError) in
                        try send(target, arguments: arguments, upload: upload, on: &machine, now: now, handoff)
                    },
                    fail: { handoff.resume(returning: .failure($0)) },
                    call: call
                )
            }
        )
        if let failure { handoff.resume(returning: .failure(failure)) }
    }

    /// Sends on the machine (with `upload`'s stream, started once the message is queued), and
    /// tells `handoff` it was sent.
    private func send(
        _ target: String,
        arguments: EncodedArguments,
        upload: HubConnection.UploadPump?,
        on machine: inout HubConnectionMachine,
        now: Instant,
        _ handoff: Handoff<Result<Void, HubConnectionError>>
    ) throws(HubConnectionError) {
        let streamId = try upload.map { _ throws(HubConnectionError) in try machine.makeUploadStream(now: now) }
        try machine.send(target, arguments: arguments, streamIds: streamId.map { [$0] } ?? [], now: now)
        if let upload, let streamId { startUpload(upload, streamId: streamId) }
        handoff.resume(returning: .success(()))
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
        _ = runner.run { (machine, now) throws(HubConnectionError) in try machine.cancelStream(id, now: now) }
    }

    /// Feeds an upload stream from its sequence: each item is encoded on the caller's task and
    /// sent here in order; the sequence's end (or error) completes the stream.
    private func startUpload(_ upload: HubConnection.UploadPump, streamId: String) {
        let send: HubConnection.UploadPump.Send = { [weak self] item in
            guard let self else { return .failure(HubConnectionError(.notConnected, "The connection was released.")) }
            return await awaitHandoff { handoff in
                self.queue.async {
                    self.submit(
                        { (machine, now) throws(HubConnectionError) in
                            switch item {
                            case .item(let value): try machine.sendStreamItem(streamId, item: value, now: now)
                            case .end(let error): try machine.completeUploadStream(streamId, error: error, now: now)
                            }
                            handoff.resume(returning: .success(()))
                        },
                        fail: { handoff.resume(returning: .failure($0)) }
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
        runner.machine.handle(target)
    }

    func setResultHandler(_ target: String, _ handler: HubConnection.ResultHandler) {
        resultHandlers[target.lowercased()] = handler
        runner.machine.handle(target)
    }

    func removeHandlers(_ target: String) {
        handlers[target.lowercased()] = nil
        resultHandlers[target.lowercased()] = nil
        runner.machine.stopHandling(target)
    }

    // MARK: - The protocol's requests

    func perform(_ request: HubConnectionMachine.Request) {
        switch request {
        case .fetchAccessToken(let generation):
            fetchAccessToken(generation: generation)
        case .negotiate(let url, let headers, let generation):
            var status = 0
            var body: [UInt8] = []
            negotiations[generation] = HTTPExchange(
                method: "POST",
                url: url,
                headers: headers,
                queue: queue,
                options: runner.options
            ) { [weak self] event in
                switch event {
                case .started(let code, _):
                    status = code
                case .body(let bytes):
                    body += bytes
                    if body.count > Self.maximumNegotiateSize {
                        self?.negotiated(
                            .failure(
                                TransportError(
                                    .protocolViolation,
                                    "the response is larger than \(Self.maximumNegotiateSize) bytes"
                                )
                            ),
                            generation: generation
                        )
                    }
                case .ended:
                    self?.negotiated(.success((status, body)), generation: generation)
                case .failed(let error):
                    self?.negotiated(.failure(error), generation: generation)
                }
            }
        }
    }

    private func fetchAccessToken(generation: TransportGeneration) {
        guard let provider = accessTokenProvider else {
            return runner.machine.accessTokenFetched(nil, generation: generation, now: now)
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
                guard !self.runner.isShutDown else { return }
                switch outcome {
                case .success(let token):
                    self.runner.machine.accessTokenFetched(token, generation: generation, now: self.now)
                case .failure(let error):
                    // The provider's error text is the app's; it is not expected to hold the token.
                    self.runner.machine.accessTokenFailed(
                        "The access token provider failed: \(error)",
                        generation: generation,
                        now: self.now
                    )
                }
                self.runner.drive()
            }
        }
    }

    /// The largest negotiate response read (it is a few hundred bytes).
    static let maximumNegotiateSize = 1 << 20

    private func negotiated(
        _ outcome: Result<(status: Int, body: [UInt8]), TransportError>,
        generation: TransportGeneration
    ) {
        guard let exchange = negotiations.removeValue(forKey: generation) else { return }
        exchange.cancel()
        switch outcome {
        case .success(let response):
            log.debug("Negotiate answered \(response.status).")
            runner.machine.negotiateResponse(
                status: response.status,
                body: response.body,
                generation: generation,
                now: now
            )
        case .failure(let error):
            log.debug("Negotiate failed: \(error)")
            runner.machine.negotiateFailed(error, generation: generation, now: now)
        }
        runner.drive()
    }

    // MARK: - Events

    func handle(_ event: consuming HubConnectionMachine.Event) {
        switch consume event {
        case .lifecycle:
            break  // the runner's
        case .invocation(let message, let handler):
            invoked(message, handler: handler)
        case .unhandledInvocation(let message):
            log.warning("No client method with the name '\(message.target)' found.")
            runner.delivery.deliver(.unhandledInvocation(message))
        case .completion(let invocationId, let result):
            if let waiter = completionWaiters.removeValue(forKey: invocationId) { complete(waiter, with: result) }
        case .streamItem(let invocationId, let item):
            if let sink = streamSinks[invocationId], !sink.yield(item) {
                // The item did not decode (the consumer has the error): cancel on the server.
                streamSinks[invocationId] = nil
                queue.async { [self] in
                    _ = runner.run { (machine, now) throws(HubConnectionError) in
                        try machine.cancelStream(invocationId, now: now)
                    }
                }
            }
        case .streamCompleted(let invocationId, let error):
            streamSinks.removeValue(forKey: invocationId)?.finish(error)
        case .sendBufferAvailable:
            break  // the runner retries the commands waiting for room after every drain
        }
    }

    /// The connection closed for good: anything still waiting (the machine completed what was
    /// pending) ends with `failure`.
    func closed(_ failure: HubConnectionError) {
        let waiters = completionWaiters.values
        completionWaiters.removeAll()
        for waiter in waiters { complete(waiter, with: .failure(failure)) }
        for sink in streamSinks.values { sink.finish(failure) }
        streamSinks.removeAll()
        for request in negotiations.values { request.cancel() }
        negotiations.removeAll()
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

/// An invocation or a send awaited by a task (`HubConnection.invoke`, `send`): its own start and
/// cancel, and where its completion (or the word that the message was sent) waits: one allocation
/// per call.
final class HubCall: RunnerCall, @unchecked Sendable {
    enum Kind {
        /// An invocation: its completion is awaited.
        case invocation
        /// A non-blocking invocation: awaited until it is handed to the transport.
        case send
    }

    let kind: Kind
    let core: HubRunner
    let target: String
    let arguments: EncodedArguments
    let upload: HubConnection.UploadPump?

    init(_ kind: Kind, core: HubRunner, target: String, arguments: EncodedArguments, upload: HubConnection.UploadPump?)
    {
        self.kind = kind
        self.core = core
        self.target = target
        self.arguments = arguments
        self.upload = upload
    }

    override func start() {
        switch kind {
        case .invocation: core.invoke(target, arguments: arguments, upload: upload, Handoff(self))
        case .send: core.send(target, arguments: arguments, upload: upload, Handoff(self))
        }
    }

    override func cancel() {
        core.cancel(self)
    }
}
