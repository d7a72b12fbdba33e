import Dispatch
import TetherCore
import TetherDispatch
import TetherXML
import TetherXMPP

/// The only code with IO and a clock for an `XMPPClient`: it owns the machine, the TCP
/// connections (one per transport generation) and one timer, feeds the machine every socket
/// event and timer expiry, carries out its actions, and re-arms the timer at the machine's
/// earliest deadline (`Specs/machine-contract.md`, "The runner").
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `queue` (the public methods of `XMPPClient` hop onto it first).
final class XMPPRunner: @unchecked Sendable {
    let queue = DispatchQueue(label: "tether.xmpp-client")
    var machine: XMPPClientMachine
    private let options: XMPPClient.Options
    private var connections: [TransportGeneration: TransportConnection] = [:]

    private let timer: DeadlineTimer
    private var isShutDown = false

    var handler: (queue: DispatchQueue, body: @Sendable (XMPPClient.Event) -> Void)?
    /// A task awaiting `flush()`.
    private struct FlushWaiter {
        let call: XMPPClient.Call
        let continuation: Handoff<Result<Void, XMPPClientError>>
    }

    private var streams: [Int: AsyncStream<XMPPClient.Event>.Continuation] = [:]
    private var nextStream = 0
    private var connectWaiters: [Handoff<Result<JID, XMPPClientError>>] = []
    private var disconnectWaiters: [Handoff<Void>] = []
    private var flushWaiters: [FlushWaiter] = []
    private var requestWaiters: [String: Handoff<Result<XMPPIQ, XMPPClientError>>] = [:]
    /// Requests whose task was canceled: their answers, when they come, are dropped.
    private var abandonedRequests: Set<String> = []

    init(configuration: XMPPClient.Configuration, options: XMPPClient.Options, hashProvider: any SCRAMHashProvider) {
        self.options = options
        var machineConfiguration = configuration
        if options.tlsSessionFactory == nil && configuration.tls == .optional { machineConfiguration.tls = .disabled }
        machine = XMPPClientMachine(
            configuration: machineConfiguration,
            hashProvider: hashProvider,
            randomSeed: options.randomSeed ?? UInt64.random(in: 0...UInt64.max)
        )
        timer = DeadlineTimer(queue: queue)
        timer.onFire = { [weak self] in self?.timerFired() }
    }

    /// The current time on the clock the machine runs on (the uptime clock Dispatch timers use).
    func now() -> Instant {
        DeadlineTimer.now()
    }

    // MARK: - Commands (on `queue`)

    func connect(_ continuation: Handoff<Result<JID, XMPPClientError>>) {
        if let jid = machine.jid { return continuation.resume(returning: .success(jid)) }
        connectWaiters.append(continuation)
        switch machine.phase {
        case .disconnected:
            machine.start(now: now())
        case .suspended:
            machine.reconnectNow(now: now())
        case .connecting, .connected, .resuming, .closing, .reconnectWaiting:
            break
        }
        drive()
    }

    /// The task awaiting `connect()` was canceled: the attempt is abandoned (the machine stops)
    /// and the waiting `connect()` calls throw `canceled`. Nothing happens once online.
    func cancelConnect() {
        guard !connectWaiters.isEmpty, machine.jid == nil else { return }
        resumeConnectWaiters(.failure(XMPPClientError(.canceled, "The connect's task was canceled.")))
        machine.stop(now: now())
        drive()
    }

    func disconnect(_ continuation: Handoff<Void>) {
        guard machine.stateName != .disconnected else { return continuation.resume() }
        disconnectWaiters.append(continuation)
        machine.stop(now: now())
        drive()
    }

    func reconnectNow() {
        machine.reconnectNow(now: now())
        drive()
    }

    func perform<Value>(
        _ body: (inout XMPPClientMachine, Instant) throws(XMPPClientError) -> Value
    ) -> Result<Value, XMPPClientError> {
        let result: Result<Value, XMPPClientError>
        do throws(XMPPClientError) {
            result = .success(try body(&machine, now()))
        } catch {
            result = .failure(error)
        }
        drive()
        return result
    }

    func request(
        _ iq: XMPPIQ,
        timeout: Duration?,
        call: XMPPClient.Call,
        _ continuation: Handoff<Result<XMPPIQ, XMPPClientError>>
    ) {
        guard !call.isCanceled else { return continuation.resume(returning: .failure(.canceledByTask)) }
        do throws(XMPPClientError) {
            let id = try machine.send(iq, timeout: timeout, now: now())
            requestWaiters[id] = continuation
            call.id = id
        } catch {
            continuation.resume(returning: .failure(error))
        }
        drive()
    }

    /// The task awaiting a request was canceled: it throws `canceled` at once; the answer, when it
    /// comes, is dropped.
    func cancel(_ call: XMPPClient.Call) {
        call.isCanceled = true
        guard let id = call.id, let waiter = requestWaiters.removeValue(forKey: id) else { return }
        abandonedRequests.insert(id)
        waiter.resume(returning: .failure(.canceledByTask))
    }

    func flush(call: XMPPClient.Call, _ continuation: Handoff<Result<Void, XMPPClientError>>) {
        guard !call.isCanceled else {
            return continuation.resume(
                returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled."))
            )
        }
        machine.requestAcknowledgement(now: now())
        flushWaiters.append(FlushWaiter(call: call, continuation: continuation))
        drive()
    }

    /// The task awaiting a flush was canceled: that flush throws `canceled` at once (what was sent
    /// stays queued for acknowledgement).
    func cancelFlush(_ call: XMPPClient.Call) {
        call.isCanceled = true
        guard let index = flushWaiters.firstIndex(where: { $0.call === call }) else { return }
        flushWaiters.remove(at: index).continuation.resume(
            returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled."))
        )
    }

    func addStream(_ continuation: AsyncStream<XMPPClient.Event>.Continuation) {
        let key = nextStream
        nextStream += 1
        streams[key] = continuation
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            queue.async { self.streams[key] = nil }
        }
    }

    /// The client is gone: close everything without events.
    func shutDown() {
        queue.async { [self] in
            isShutDown = true
            for connection in connections.values { connection.close() }
            connections.removeAll()
            timer.cancel()
            for stream in streams.values { stream.finish() }
            streams.removeAll()
        }
    }

    // MARK: - The loop

    /// Carries out the machine's actions, then re-arms the timer.
    func drive() {
        guard !isShutDown else { return }
        while let action = machine.pollAction() {
            switch action {
            case .openTransport(let endpoint, let generation, let directTLSServerName):
                let connection = TransportConnection(
                    endpoint: endpoint,
                    queue: queue,
                    connectTimeout: options.tcpConnectTimeout,
                    readBufferSize: options.readBufferSize,
                    directTLSServerName: directTLSServerName,
                    settings: TLSSettings(factory: options.tlsSessionFactory, caFile: options.caFile)
                ) { [weak self] event in
                    self?.transportEvent(event, generation: generation)
                }
                connections[generation] = connection
                connection.start()
            case .send(let bytes, let generation, let containsCredentials):
                if let log = options.trafficLog {
                    log(
                        XMPPClient.Traffic(
                            direction: .sent,
                            text: containsCredentials
                                ? XMPPClient.Traffic.hidingCredentials(bytes)
                                : String(decoding: bytes, as: UTF8.self)
                        )
                    )
                }
                connections[generation]?.send(bytes)
            case .startTLS(let serverName, let generation, let buffered):
                connections[generation]?.startTLS(serverName: serverName, buffered: buffered)
            case .closeTransport(let generation):
                connections.removeValue(forKey: generation)?.close()
            case .event(let event):
                deliver(event)
            }
        }
        resolveFlushWaiters()
        armTimer()
    }

    private func transportEvent(_ event: TransportConnection.Event, generation: TransportGeneration) {
        guard connections[generation] != nil else { return }
        switch event {
        case .connected:
            machine.transportConnected(generation: generation, now: now())
        case .tlsEstablished:
            machine.tlsEstablished(generation: generation, now: now())
        case .tlsFailed(let reason):
            connections.removeValue(forKey: generation)?.close()
            machine.tlsFailed(generation: generation, reason: reason, now: now())
        case .received(let bytes):
            options.trafficLog?(XMPPClient.Traffic(direction: .received, text: String(decoding: bytes, as: UTF8.self)))
            machine.transportReceived(bytes, generation: generation, now: now())
        case .drained:
            break
        case .closed(let error):
            connections.removeValue(forKey: generation)?.close()
            machine.transportClosed(generation: generation, error: error, now: now())
        }
        drive()
    }

    private func timerFired() {
        machine.handleTimeout(now: now())
        drive()
    }

    private func armTimer() {
        timer.arm(at: machine.pollTimeout())
    }

    // MARK: - Events and waiters

    private func deliver(_ event: XMPPClient.Event) {
        if case .iqResponse(let id, let outcome) = event {
            // Answers to `request` go to their caller only (or nowhere, when it gave up).
            if let waiter = requestWaiters.removeValue(forKey: id) {
                return waiter.resume(returning: Self.result(of: outcome))
            }
            if abandonedRequests.remove(id) != nil { return }
        }
        // The app sees the event before any waiter resumes, so that a caller returning from
        // `connect()` or `disconnect()` finds it already delivered.
        if let handler {
            let body = handler.body
            handler.queue.async { body(event) }
        }
        for stream in streams.values { stream.yield(event) }
        switch event {
        case .connected(let jid), .resumed(let jid):
            resumeConnectWaiters(.success(jid))
        case .suspended(let error):
            resumeConnectWaiters(.failure(error))
        case .closed(let error):
            let failure = error ?? XMPPClientError(.notConnected, "The connection was stopped.")
            resumeConnectWaiters(.failure(failure))
            for waiter in disconnectWaiters { waiter.resume() }
            disconnectWaiters.removeAll()
            for waiter in flushWaiters { waiter.continuation.resume(returning: .failure(failure)) }
            flushWaiters.removeAll()
        case .resumeFailed, .streamManagementEnabled, .disconnected, .connectAttemptFailed, .reconnecting, .message,
            .presence, .subscriptionRequest, .iqRequest, .iqResponse, .roster, .rosterPush, .unacknowledgedStanzas:
            break
        }
    }

    private func resumeConnectWaiters(_ result: Result<JID, XMPPClientError>) {
        for waiter in connectWaiters { waiter.resume(returning: result) }
        connectWaiters.removeAll()
    }

    private func resolveFlushWaiters() {
        guard !flushWaiters.isEmpty, machine.unacknowledgedCount == 0,
            connections.values.allSatisfy({ $0.pendingWriteCount == 0 }),
            machine.stateName == .connected || machine.stateName == .disconnected
        else { return }
        for waiter in flushWaiters { waiter.continuation.resume(returning: .success(())) }
        flushWaiters.removeAll()
    }

    static func result(of outcome: XMPPClientMachine.IQOutcome) -> Result<XMPPIQ, XMPPClientError> {
        switch outcome {
        case .result(let iq):
            return .success(iq)
        case .error(let iq):
            let error = iq.error ?? StanzaError(type: nil, condition: .undefinedCondition)
            var message = "The request failed with \(error.condition.rawValue)"
            if let text = error.text, !text.isEmpty { message += ": \(text)" }
            return .failure(XMPPClientError(.iqError, message + ".", stanzaError: error))
        case .timedOut:
            return .failure(XMPPClientError(.iqTimeout, "No answer to the request in time."))
        case .notDelivered(let error):
            return .failure(error ?? XMPPClientError(.notConnected, "The connection was stopped."))
        }
    }
}
