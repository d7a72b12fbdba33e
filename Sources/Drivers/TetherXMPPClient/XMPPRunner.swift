import Dispatch
import TetherCore
import TetherDNS
import TetherDispatch
import TetherXML
import TetherXMPP

/// The XMPP part of an `XMPPClient`'s runner: how `XMPPClientMachine`'s actions are carried out
/// (one `ByteTransport` per transport generation, TLS inserted where the machine says) and the
/// calls that wait for something the protocol answers (connect, disconnect, iq requests,
/// flushes, sends waiting for room). The queue, the timer, the action loop and event delivery
/// are the shared `ConnectionRunner`'s (`Specs/machine-contract.md`, "The runner").
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `core.queue`.
final class XMPPRunner: @unchecked Sendable {
    let core: ConnectionRunner<XMPPClientMachine, XMPPClient.Event>
    private let options: XMPPClient.Options
    private let log: ConnectionLog
    private var transports: [TransportGeneration: any ByteTransport] = [:]
    /// The DNS resolver, made at the first lookup.
    private lazy var dns = DNSLookup(nameServers: options.nameServers)

    private struct FlushWaiter {
        let call: XMPPClient.Call
        let handoff: Handoff<Result<Void, XMPPClientError>>
    }

    private var connectWaiters: [Handoff<Result<JID, XMPPClientError>>] = []
    private var disconnectWaiters: [Handoff<Void>] = []
    private var flushWaiters: [FlushWaiter] = []
    private var requestWaiters: [String: Handoff<Result<XMPPIQ, XMPPClientError>>] = [:]
    /// Requests whose task was canceled: their answers, when they come, are dropped.
    private var abandonedRequests: Set<String> = []
    /// Sends waiting for room in the stream-management queue (`BackPressure.wait`).
    private var blocked = BlockedCommands<XMPPClientMachine, XMPPClientError>()

    init(configuration: XMPPClient.Configuration, options: XMPPClient.Options, hashProvider: any SCRAMHashProvider) {
        self.options = options
        log = ConnectionLog(level: options.logLevel, handler: options.logHandler)
        var machineConfiguration = configuration
        if options.tlsSessionFactory == nil && configuration.tls == .optional { machineConfiguration.tls = .disabled }
        core = ConnectionRunner(
            label: "tether.xmpp-client",
            machine: XMPPClientMachine(
                configuration: machineConfiguration,
                hashProvider: hashProvider,
                randomSeed: options.randomSeed ?? UInt64.random(in: 0...UInt64.max)
            )
        )
        core.bind(
            perform: { [unowned self] action in perform(action) },
            afterDrain: { [unowned self] in afterDrain() }
        )
        core.completeHealth = { [unowned self] health in
            health.tlsVersion = core.machine.currentGeneration.flatMap { transports[$0]?.tlsVersion }
            health.unsentBytes = unsentByteCount
        }
    }

    /// The client is gone: close everything without events (the block keeps the runner alive
    /// until it has run).
    func shutDown() {
        core.queue.async { [self] in
            for transport in transports.values { transport.close() }
            transports.removeAll()
            core.shutDown()
        }
    }

    private var now: Instant { core.now() }

    // MARK: - Commands (on the queue)

    func connect(_ handoff: Handoff<Result<JID, XMPPClientError>>) {
        if let jid = core.machine.jid { return handoff.resume(returning: .success(jid)) }
        connectWaiters.append(handoff)
        switch core.machine.phase {
        case .disconnected:
            log.info("Connecting as \(core.machine.configuration.jid).")
            core.machine.start(now: now)
        case .suspended:
            core.machine.reconnectNow(now: now)
        case .connecting, .connected, .resuming, .closing, .reconnectWaiting:
            break
        }
        core.drive()
    }

    /// The task awaiting `connect()` was canceled: the attempt is abandoned (the machine stops)
    /// and the waiting `connect()` calls throw `canceled`. Nothing happens once online.
    func cancelConnect() {
        guard !connectWaiters.isEmpty, core.machine.jid == nil else { return }
        resumeConnectWaiters(.failure(XMPPClientError(.canceled, "The connect's task was canceled.")))
        core.machine.stop(now: now)
        core.drive()
    }

    func disconnect(_ handoff: Handoff<Void>) {
        guard core.machine.phase != .disconnected else { return handoff.resume() }
        disconnectWaiters.append(handoff)
        log.info("Disconnecting.")
        core.machine.stop(now: now)
        core.drive()
    }

    func reconnectNow() {
        core.machine.reconnectNow(now: now)
        core.drive()
    }

    func networkChanged(_ path: NetworkPath) {
        log.debug("Network: \(path).")
        core.machine.networkChanged(path, now: now)
        core.drive()
    }

    func applicationStateChanged(_ application: ApplicationState) {
        log.debug("Application: \(application.rawValue).")
        core.machine.applicationStateChanged(application, now: now)
        core.drive()
    }

    /// Runs an app send; when the queue of unacknowledged stanzas is full it waits its turn
    /// (`BackPressure.wait`: an acknowledgement is asked for at once) or fails.
    func submit<Value>(
        _ body: @escaping (inout XMPPClientMachine, Instant) throws(XMPPClientError) -> Value,
        call: XMPPClient.Call,
        completion: @escaping (Result<Value, XMPPClientError>) -> Void
    ) {
        guard !call.isCanceled else { return completion(.failure(.canceledByTask)) }
        let command = BlockedCommands<XMPPClientMachine, XMPPClientError>.Command(
            run: { [unowned self] machine, now throws(XMPPClientError) in
                try checkNetworkRoom()
                completion(.success(try body(&machine, now)))
            },
            fail: { completion(.failure($0)) },
            call: call
        )
        let waits = blocked.submit(command, on: &core.machine, now: now, backPressure: options.backPressure) {
            $0.kind == .sendQueueFull
        }
        if waits {
            if let reason = options.networkFullReason(unsent: unsentByteCount) {
                log.debug("\(reason) A send waits for room.")
            } else {
                log.debug("The queue of unacknowledged stanzas is full: a send waits for room.")
                core.machine.requestAcknowledgement(now: now)
            }
        }
        core.drive()
    }

    /// The bytes sent that the network has not taken yet, over every open transport.
    private var unsentByteCount: Int { transports.values.reduce(0) { $0 + $1.pendingWriteCount } }

    /// Throws `sendQueueFull` while the transports hold more than `maximumUnsentBytes`.
    private func checkNetworkRoom() throws(XMPPClientError) {
        if let reason = options.networkFullReason(unsent: unsentByteCount) {
            throw XMPPClientError(.sendQueueFull, reason)
        }
    }

    /// The task of a send waiting for room was canceled: it throws `canceled` and is never sent.
    func cancelSubmit(_ call: XMPPClient.Call) {
        call.isCanceled = true
        _ = blocked.cancel(call, with: .canceledByTask)
    }

    func request(
        _ iq: XMPPIQ,
        timeout: Duration?,
        call: XMPPClient.Call,
        _ handoff: Handoff<Result<XMPPIQ, XMPPClientError>>
    ) {
        let sent: (Result<String, XMPPClientError>) -> Void = { [unowned self] result in
            switch result {
            case .success(let id):
                call.id = id
                requestWaiters[id] = handoff
            case .failure(let error):
                handoff.resume(returning: .failure(error))
            }
        }
        submit(
            { machine, now throws(XMPPClientError) in try machine.send(iq, timeout: timeout, now: now) },
            call: call,
            completion: sent
        )
    }

    /// The task awaiting a request was canceled: it throws `canceled` at once; the answer, when it
    /// comes, is dropped (a request still waiting for room is never sent).
    func cancel(_ call: XMPPClient.Call) {
        call.isCanceled = true
        if blocked.cancel(call, with: .canceledByTask) { return }
        guard let id = call.id, let waiter = requestWaiters.removeValue(forKey: id) else { return }
        abandonedRequests.insert(id)
        waiter.resume(returning: .failure(.canceledByTask))
    }

    func flush(call: XMPPClient.Call, _ handoff: Handoff<Result<Void, XMPPClientError>>) {
        guard !call.isCanceled else {
            return handoff.resume(returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled.")))
        }
        core.machine.requestAcknowledgement(now: now)
        flushWaiters.append(FlushWaiter(call: call, handoff: handoff))
        core.drive()
    }

    /// The task awaiting a flush was canceled: that flush throws `canceled` at once (what was sent
    /// stays queued for acknowledgement).
    func cancelFlush(_ call: XMPPClient.Call) {
        call.isCanceled = true
        guard let index = flushWaiters.firstIndex(where: { $0.call === call }) else { return }
        flushWaiters.remove(at: index).handoff.resume(
            returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled."))
        )
    }

    // MARK: - Actions

    private func perform(_ action: XMPPClientMachine.Action) {
        switch action {
        case .openTransport(let endpoint, let generation, let directTLSServerName):
            log.debug("Connecting to \(endpoint)\(directTLSServerName == nil ? "" : " with direct TLS").")
            let transport = options.makeTransport(
                to: endpoint,
                directTLSServerName: directTLSServerName,
                queue: core.queue
            ) { [weak self] event in
                self?.transportEvent(event, generation: generation)
            }
            transports[generation] = transport
            transport.start()
        case .openWebSocket(let url, let generation):
            log.debug("Connecting to \(url) (XMPP over WebSocket).")
            let transport = WebSocketByteTransport(
                url: url,
                subprotocol: "xmpp",
                userAgent: "Tether/0.1 (Swift)",
                // One message is one element; the parser's own bound (with its stream error)
                // comes first, this one keeps memory bounded.
                maximumMessageSize: core.machine.configuration.parserLimits.maximumElementSize + 4096,
                options: options,
                queue: core.queue
            ) { [weak self] event in
                self?.transportEvent(event, generation: generation)
            }
            transports[generation] = transport
            transport.start()
        case .send(let bytes, let generation, let containsCredentials):
            log.trace {
                "Sending "
                    + (containsCredentials
                        ? Self.hidingCredentials(bytes) : String(decoding: bytes, as: UTF8.self))
            }
            transports[generation]?.send(bytes)
        case .startTLS(let serverName, let generation, let buffered):
            log.debug("Starting TLS for \(serverName).")
            transports[generation]?.startTLS(serverName: serverName, bufferedBytes: buffered)
        case .lookUpService(let domain, let generation):
            lookUpService(domain, generation: generation)
        case .closeTransport(let generation):
            transports.removeValue(forKey: generation)?.close()
        case .event(let event):
            deliver(event)
        }
    }

    /// Both SRV lookups at once, and the domain's own A record (only to learn whether the domain
    /// exists: NXDOMAIN with no SRV records means no service); the answers go to the machine
    /// together (a failed lookup is `.none`: the domain itself is tried, as RFC 6120 §3.2.2 says).
    private func lookUpService(_ domain: String, generation: TransportGeneration) {
        let names = XMPPServiceTargets.lookupNames(for: domain)
        let dns = dns
        let queue = core.queue
        Task { [weak self] in
            async let startTLS = dns.resolve(DNSQuestion(name: names.startTLS, type: .srv))
            async let directTLS = dns.resolve(DNSQuestion(name: names.directTLS, type: .srv))
            async let domainAddress = dns.resolve(DNSQuestion(name: domain, type: .a))
            let answers = await (startTLS, directTLS, domainAddress)
            queue.async { [weak self] in
                guard let self else { return }
                let startTLS = lookup(names.startTLS, answers.0)
                let directTLS = lookup(names.directTLS, answers.1)
                var domainExists = true
                if case .success(let response) = answers.2, response.responseCode == .nameError {
                    log.debug("DNS: \(domain) A: no such name (NXDOMAIN).")
                    domainExists = false
                }
                core.machine.serviceLookedUp(
                    startTLS: startTLS,
                    directTLS: directTLS,
                    domainExists: domainExists,
                    generation: generation,
                    now: core.now()
                )
                core.drive()
            }
        }
    }

    private func lookup(
        _ name: String,
        _ answer: Result<DNSResponse, DNSResolverMachine.Failure>
    ) -> XMPPServiceTargets.Lookup {
        switch answer {
        case .success(let response):
            let records = response.records(for: name, type: .srv)
            log.debug("DNS: \(name) SRV: \(records.isEmpty ? "none (\(response.responseCode))" : "\(records)").")
            return records.isEmpty ? .none : .records(records)
        case .failure(let failure):
            log.debug("DNS: \(name) SRV: \(failure.message)")
            return .none
        }
    }

    private func afterDrain() {
        if !blocked.isEmpty {
            blocked.retry(on: &core.machine, now: now) { $0.kind == .sendQueueFull }
        }
        resolveFlushWaiters()
    }

    private func transportEvent(_ event: ByteTransportEvent, generation: TransportGeneration) {
        guard transports[generation] != nil else { return }
        switch event {
        case .connected:
            core.machine.transportConnected(generation: generation, now: now)
        case .tlsEstablished:
            core.machine.tlsEstablished(generation: generation, now: now)
        case .tlsFailed(let reason):
            transports.removeValue(forKey: generation)?.close()
            log.debug("TLS failed: \(reason)")
            core.machine.tlsFailed(generation: generation, reason: reason, now: now)
        case .certificateRefused(let reason):
            transports.removeValue(forKey: generation)?.close()
            log.debug("The certificate was refused: \(reason)")
            core.machine.certificateRefused(generation: generation, reason: reason, now: now)
        case .received(let bytes):
            log.trace { "Received " + String(decoding: bytes, as: UTF8.self) }
            core.machine.transportReceived(bytes, generation: generation, now: now)
        case .drained:
            break
        case .closed(let error):
            transports.removeValue(forKey: generation)?.close()
            log.debug("The connection closed\(error.map { ": \($0)" } ?? ".")")
            core.machine.transportClosed(generation: generation, error: error, now: now)
        }
        core.drive()
    }

    /// A SASL element as the log shows it: its start and end tags (the mechanism included), its
    /// content, which carries the credentials, replaced by a placeholder.
    static func hidingCredentials(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let startTagEnd = text.firstIndex(of: ">"), let endTagStart = text.lastIndex(of: "<"),
            startTagEnd < endTagStart
        else { return "[\(bytes.count) bytes of SASL credentials not shown]" }
        let hidden = text.utf8.distance(from: text.index(after: startTagEnd), to: endTagStart)
        return text[...startTagEnd] + "[\(hidden) bytes of SASL credentials not shown]" + text[endTagStart...]
    }

    // MARK: - Events and waiters

    private func deliver(_ event: XMPPClient.Event) {
        switch event {
        case .iqResponse(let id, let outcome):
            // Answers to `request` go to their caller only (or nowhere, when it gave up).
            if let waiter = requestWaiters.removeValue(forKey: id) {
                return waiter.resume(returning: Self.result(of: outcome))
            }
            if abandonedRequests.remove(id) != nil { return }
            core.events.deliver(event)
        case .connected(let jid), .resumed(let jid):
            log.info(event == .connected(jid) ? "Connected as \(jid)." : "Resumed as \(jid).")
            let waiters = takeConnectWaiters()
            core.events.deliver(event) { for waiter in waiters { waiter.resume(returning: .success(jid)) } }
        case .suspended(let error):
            log.error("The reconnect policy gave up: \(error)")
            let waiters = takeConnectWaiters()
            core.events.deliver(event) { for waiter in waiters { waiter.resume(returning: .failure(error)) } }
        case .closed(let error):
            if let error { log.error("Stopped: \(error)") } else { log.info("Stopped.") }
            let failure = error ?? XMPPClientError(.notConnected, "The connection was stopped.")
            let waiters = takeConnectWaiters()
            let disconnecting = disconnectWaiters
            disconnectWaiters.removeAll()
            let flushing = flushWaiters
            flushWaiters.removeAll()
            blocked.failAll(failure)
            core.events.deliver(event) {
                for waiter in waiters { waiter.resume(returning: .failure(failure)) }
                for waiter in disconnecting { waiter.resume() }
                for waiter in flushing { waiter.handoff.resume(returning: .failure(failure)) }
            }
        case .disconnected(let error):
            if let error { log.warning("The connection was lost: \(error)") }
            core.events.deliver(event)
        case .reconnecting(let attempt, let delay):
            log.info("Reconnect attempt \(attempt) in \(delay).")
            core.events.deliver(event)
        case .connectAttemptFailed(let error):
            log.debug("The connect attempt failed: \(error)")
            core.events.deliver(event)
        case .waitingForNetwork:
            log.info("No network: reconnecting when it is back.")
            core.events.deliver(event)
        case .resumeFailed, .streamManagementEnabled, .message, .presence, .subscriptionRequest, .iqRequest, .roster,
            .rosterPush, .unacknowledgedStanzas:
            core.events.deliver(event)
        }
    }

    private func takeConnectWaiters() -> [Handoff<Result<JID, XMPPClientError>>] {
        defer { connectWaiters.removeAll() }
        return connectWaiters
    }

    private func resumeConnectWaiters(_ result: Result<JID, XMPPClientError>) {
        for waiter in takeConnectWaiters() { waiter.resume(returning: result) }
    }

    private func resolveFlushWaiters() {
        guard !flushWaiters.isEmpty, core.machine.unacknowledgedCount == 0,
            transports.values.allSatisfy({ $0.pendingWriteCount == 0 }),
            core.machine.phase == .connected || core.machine.phase == .disconnected
        else { return }
        for waiter in flushWaiters { waiter.handoff.resume(returning: .success(())) }
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
