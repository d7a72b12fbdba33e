import Dispatch
@_spi(TetherInternal) import TetherCore
import TetherDNS
@_spi(TetherInternal) import TetherDispatch
import TetherXML
import TetherXMPP

/// What XMPP adds to the generic `ConnectionRunner` (which carries out every transport action,
/// the lifecycle and its waiters, back-pressure, the device inputs and health): its own requests
/// (STARTTLS on the generation's transport, the SRV lookups), and the calls only XMPP has: iq
/// requests awaiting their answer, and flushes awaiting the server's acknowledgement.
///
/// `@unchecked Sendable` because Dispatch carries it into handlers: every member is read and
/// written only on `runner.queue`.
final class XMPPRunner: ConnectionProtocolPart, @unchecked Sendable {
    let runner: ConnectionRunner<XMPPClientMachine, XMPPClient.Event>
    /// Hides token values in the trace log, across reads that split them.
    private var tokenRedaction = TokenRedaction()
    /// The DNS resolver, made at the first lookup.
    private lazy var dns = DNSLookup(nameServers: runner.options.nameServers)

    /// Who waits for a request's answer: a task (`request(_:timeout:)`), or a completion run as
    /// a job of the executor (`request(_:timeout:completion:)`).
    private enum RequestWaiter {
        case task(Handoff<Result<XMPPIQ, XMPPClientError>>)
        case completion(@Sendable (Result<XMPPIQ, XMPPClientError>) -> Void)
    }

    private var flushWaiters: [Handoff<Result<Void, XMPPClientError>>] = [] {
        // `afterDrain` has work only while a flush waits.
        didSet { runner.wantsAfterDrain = !flushWaiters.isEmpty }
    }
    @exclusivity(unchecked) private var requestWaiters: [String: RequestWaiter] = [:]
    /// Requests whose task was canceled: their answers, when they come, are dropped.
    @exclusivity(unchecked) private var abandonedRequests: Set<String> = []

    init(configuration: XMPPClient.Configuration, options: XMPPClient.Options, hashProvider: any SCRAMHashProvider) {
        var machineConfiguration = configuration
        if options.tlsSessionFactory == nil && configuration.tls == .optional { machineConfiguration.tls = .disabled }
        runner = ConnectionRunner(
            label: "tether.xmpp-client",
            machine: XMPPClientMachine(
                configuration: machineConfiguration,
                hashProvider: hashProvider,
                randomSeed: options.machineSeed
            ),
            options: options,
            lifecycleEvent: XMPPClient.Event.lifecycle
        )
        runner.bind(self)
    }

    // MARK: - The runner's calls (ConnectionProtocolPart)

    func closed(_ failure: XMPPClientError) {
        let flushing = flushWaiters
        flushWaiters.removeAll()
        for waiter in flushing { waiter.resume(returning: .failure(failure)) }
    }

    /// The client is gone (released) while requests with completions wait: each completion is
    /// called with `notConnected`, as the machine ends the requests of a connection that closes.
    /// (A task awaiting a call holds the client, so none waits now.)
    func shutDown() {
        let failure = XMPPClientError(.notConnected, "The client was released.")
        let waiting = requestWaiters.values
        requestWaiters.removeAll()
        for case .completion(let completion) in waiting { runner.executor.perform { completion(.failure(failure)) } }
        closed(failure)
    }

    func queueFull() {
        runner.log.debug("The queue of unacknowledged stanzas is full: a send waits for room.")
        runner.machine.requestAcknowledgement(now: runner.now())
    }

    private var now: Instant { runner.now() }

    // MARK: - Requests (on the queue)

    /// Sends an iq request; its answer goes to `handoff` (unless its call is canceled first).
    func request(_ iq: XMPPIQ, timeout: Duration?, _ handoff: Handoff<Result<XMPPIQ, XMPPClientError>>) {
        let call = handoff.call
        // At once when nothing waits for room (no command built), else as a command that waits.
        let failure = runner.runForCompletion(
            call: call,
            { machine, now throws(XMPPClientError) in
                try send(iq, timeout: timeout, on: &machine, now: now, to: .task(handoff), call: call)
            },
            later: {
                .init(
                    run: { [unowned self] machine, now throws(XMPPClientError) in
                        try send(iq, timeout: timeout, on: &machine, now: now, to: .task(handoff), call: call)
                    },
                    fail: { handoff.resume(returning: .failure($0)) },
                    call: call
                )
            }
        )
        if let failure { handoff.resume(returning: .failure(failure)) }
    }

    /// Sends an iq request; its answer goes to `completion`, run as a job of the executor.
    func request(
        _ iq: XMPPIQ,
        timeout: Duration?,
        completion: @escaping @Sendable (Result<XMPPIQ, XMPPClientError>) -> Void
    ) {
        let executor = runner.executor
        let failure = runner.runForCompletion(
            { machine, now throws(XMPPClientError) in
                try send(iq, timeout: timeout, on: &machine, now: now, to: .completion(completion))
            },
            later: {
                .init(
                    run: { [unowned self] machine, now throws(XMPPClientError) in
                        try send(iq, timeout: timeout, on: &machine, now: now, to: .completion(completion))
                    },
                    fail: { error in executor.perform { completion(.failure(error)) } }
                )
            }
        )
        if let failure { executor.perform { completion(.failure(failure)) } }
    }

    /// Sends `iq` on the machine; its answer goes to `waiter` (the id noted in `call`, for its
    /// cancellation).
    private func send(
        _ iq: XMPPIQ,
        timeout: Duration?,
        on machine: inout XMPPClientMachine,
        now: Instant,
        to waiter: RequestWaiter,
        call: RunnerCall? = nil
    ) throws(XMPPClientError) {
        let id = try machine.send(iq, timeout: timeout, now: now)
        call?.id = id
        requestWaiters[id] = waiter
    }

    /// The task awaiting a request was canceled: it throws `canceled` at once; the answer, when it
    /// comes, is dropped (a request still waiting for room is never sent).
    func cancel(_ call: RunnerCall) {
        if runner.cancelWaitingCommand(call) { return }
        guard let id = call.id, case .task(let waiter)? = requestWaiters[id] else { return }
        requestWaiters[id] = nil
        abandonedRequests.insert(id)
        waiter.resume(returning: .failure(XMPPClientError(.canceled, "The request's task was canceled.")))
    }

    func flush(_ handoff: Handoff<Result<Void, XMPPClientError>>) {
        guard !handoff.call.isCanceled else {
            return handoff.resume(returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled.")))
        }
        runner.machine.requestAcknowledgement(now: now)
        flushWaiters.append(handoff)
        runner.drive()
    }

    /// The task awaiting a flush was canceled: that flush throws `canceled` at once (what was sent
    /// stays queued for acknowledgement).
    func cancelFlush(_ call: RunnerCall) {
        call.isCanceled = true
        guard let index = flushWaiters.firstIndex(where: { $0.call === call }) else { return }
        flushWaiters.remove(at: index).resume(
            returning: .failure(XMPPClientError(.canceled, "The flush's task was canceled."))
        )
    }

    /// After every drain: the flushes whose stanzas are all acknowledged and taken end.
    func afterDrain() {
        guard !flushWaiters.isEmpty, runner.machine.unacknowledgedCount == 0, runner.unsentByteCount == 0,
            runner.machine.phase == .connected || runner.machine.phase == .disconnected
        else { return }
        for waiter in flushWaiters { waiter.resume(returning: .success(())) }
        flushWaiters.removeAll()
    }

    // MARK: - The protocol's requests and events

    func perform(_ request: XMPPClientMachine.Request) {
        switch request {
        case .startTLS(let serverName, let generation, let buffered):
            runner.transports[generation]?.startTLS(serverName: serverName, bufferedBytes: buffered)
        case .lookUpService(let domain, let generation):
            lookUpService(domain, generation: generation)
        }
    }

    /// Both SRV lookups at once, and the domain's own A record (only to learn whether the domain
    /// exists: NXDOMAIN with no SRV records means no service); the answers go to the machine
    /// together (a failed lookup is `.none`: the domain itself is tried, as RFC 6120 §3.2.2 says).
    private func lookUpService(_ domain: String, generation: TransportGeneration) {
        let names = XMPPServiceTargets.lookupNames(for: domain)
        let dns = dns
        let queue = runner.queue
        Task { [weak self] in
            async let startTLS = dns.resolve(DNSQuestion(name: names.startTLS, type: .srv))
            async let directTLS = dns.resolve(DNSQuestion(name: names.directTLS, type: .srv))
            async let domainAddress = dns.resolve(DNSQuestion(name: domain, type: .a))
            let answers = await (startTLS, directTLS, domainAddress)
            queue.async { [weak self] in
                guard let self, !runner.isShutDown else { return }
                let startTLS = lookup(names.startTLS, answers.0)
                let directTLS = lookup(names.directTLS, answers.1)
                var domainExists = true
                if case .success(let response) = answers.2, response.responseCode == .nameError {
                    runner.log.debug("DNS: \(domain) A: no such name (NXDOMAIN).")
                    domainExists = false
                }
                runner.machine.serviceLookedUp(
                    startTLS: startTLS,
                    directTLS: directTLS,
                    domainExists: domainExists,
                    generation: generation,
                    now: now
                )
                let order = runner.machine.targetOrder
                if !order.isEmpty {
                    let failing = runner.machine.health(now: now).failingServers
                    runner.log.debug(
                        "Servers in the order tried: \(order.map(\.description).joined(separator: ", "))"
                            + (failing.isEmpty
                                ? "." : " (last, as they failed before: \(failing.joined(separator: ", "))).")
                    )
                }
                runner.drive()
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
            runner.log.debug(
                "DNS: \(name) SRV: \(records.isEmpty ? "none (\(response.responseCode))" : "\(records)")."
            )
            return records.isEmpty ? .none : .records(records)
        case .failure(let failure):
            runner.log.debug("DNS: \(name) SRV: \(failure.message)")
            return .none
        }
    }

    /// Answers to `request` go to their caller only (or nowhere, when it gave up); every other
    /// event to the app.
    /// The trace log's text of what went or came, with the values of `token` attributes hidden:
    /// FAST tokens (XEP-0484 `<token token='…'/>` in the server's SASL2 success) log in like
    /// passwords. Only called while tracing, in order on the runner's queue.
    func describe(_ bytes: [UInt8]) -> String {
        String(decoding: tokenRedaction.redact(bytes), as: UTF8.self)
    }

    func handle(_ event: consuming XMPPClient.Event) {
        // Taken apart (`consume`), so that the answer's parts are moved, not copied.
        switch consume event {
        case .iqResponse(let id, let outcome):
            switch requestWaiters.removeValue(forKey: id) {
            case .task(let handoff): return handoff.resume(returning: Self.result(of: outcome))
            case .completion(let completion):
                let result = Self.result(of: outcome)
                return runner.executor.perform { completion(result) }
            case nil: break
            }
            if abandonedRequests.remove(id) != nil { return }
            runner.delivery.deliver(.iqResponse(id: id, outcome))
        case let other:
            runner.delivery.deliver(other)
        }
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
            return .failure(error)
        }
    }
}

/// Hides the value of every `token` attribute (` token='…'` or ` token="…"`) in a stream of
/// chunks, carrying its place across chunks: a read may end inside the attribute's name or value,
/// and the rest of the secret must not show in the next one.
struct TokenRedaction {
    private static let marker = Array(" token=".utf8)
    /// How many bytes of `marker` the last chunk ended with.
    private var matched = 0
    /// Inside a value: its quote; nil outside.
    private var quote: UInt8?
    /// Right after `marker`: the next byte opens the value (or not).
    private var expectingQuote = false

    /// `chunk` with the token values (or their parts in it) replaced by `[hidden]`.
    mutating func redact(_ chunk: [UInt8]) -> [UInt8] {
        let hidden = Array("[hidden]".utf8)
        // A chunk that starts inside a value shows where its hidden part was.
        var result: [UInt8] = quote == nil ? [] : hidden
        result.reserveCapacity(chunk.count)
        for byte in chunk {
            if let open = quote {
                if byte == open {
                    quote = nil
                    result.append(byte)
                }
                continue
            }
            result.append(byte)
            if expectingQuote {
                expectingQuote = false
                if byte == UInt8(ascii: "'") || byte == UInt8(ascii: "\"") {
                    quote = byte
                    result += hidden
                    continue
                }
            }
            if byte == Self.marker[matched] {
                matched += 1
                if matched == Self.marker.count {
                    matched = 0
                    expectingQuote = true
                }
            } else {
                matched = byte == Self.marker[0] ? 1 : 0
            }
        }
        return result
    }
}

/// A request awaited by a task (`XMPPClient.request(_:timeout:)`): its own start and cancel, and
/// where its answer waits (one allocation per request).
final class IQRequestCall: RunnerCall, @unchecked Sendable {
    let core: XMPPRunner
    let iq: XMPPIQ
    let timeout: Duration?

    init(core: XMPPRunner, iq: XMPPIQ, timeout: Duration?) {
        self.core = core
        self.iq = iq
        self.timeout = timeout
    }

    override func start() {
        core.request(iq, timeout: timeout, Handoff(self))
    }

    override func cancel() {
        core.cancel(self)
    }
}
