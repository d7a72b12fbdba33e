@_spi(TetherInternal) public import TetherCore

/// A stub resolver as a sans-IO machine: it asks the configured nameservers over UDP, with a
/// timeout and retries across them, asks again over TCP when an answer is truncated, and checks
/// that every answer is the one asked for (the server asked, the query's ID, its question):
/// anything else is ignored, as a spoofed or stray packet must be (`Specs/dns.md`, "Resolver").
///
/// Each `resolve` is a query with a handle; the driver carries out the actions (`sendUDP`,
/// `openTCP`, `sendTCP`, `closeTCP`), reports what arrives for that handle, and calls
/// `handleTimeout(now:)` at `pollTimeout()`. The answer comes as `answered`.
public struct DNSResolverMachine: Sendable {
    /// Where and how to ask.
    public struct Configuration: Sendable {
        /// The nameservers, tried in turn (port 53 unless given).
        public var nameServers: [Endpoint]
        /// How long one try waits for its answer (default 2 s).
        public var timeout: Duration
        /// How many times each nameserver is tried (default 2), so a query makes at most
        /// `attempts × nameServers.count` tries.
        public var attempts: Int
        /// What a response may hold.
        public var limits: DNSMessage.Limits

        /// A configuration asking `nameServers` in order, waiting `timeout` for each answer, `attempts` rounds.
        public init(
            nameServers: [Endpoint],
            timeout: Duration = .seconds(2),
            attempts: Int = 2,
            limits: DNSMessage.Limits = DNSMessage.Limits()
        ) {
            self.nameServers = nameServers
            self.timeout = timeout
            self.attempts = max(1, attempts)
            self.limits = limits
        }
    }

    /// Why a query got no answer.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What went wrong, readable.
        public let message: String
        public var description: String { message }
    }

    /// What the resolver asks of its driver.
    public enum Action: Sendable, Equatable {
        /// Send `bytes` in one UDP datagram to `server`; report what comes back from it with
        /// `udpReceived`.
        case sendUDP([UInt8], to: Endpoint, query: Int)
        /// Open a TCP connection to `server` for `query`; report `tcpConnected`, `tcpReceived`,
        /// `tcpClosed`.
        case openTCP(to: Endpoint, query: Int)
        /// Send `bytes` (a length-prefixed message) on `query`'s TCP connection.
        case sendTCP([UInt8], query: Int)
        /// Close `query`'s TCP connection (nothing more from it is used).
        case closeTCP(query: Int)
        /// The query is over: the response (which may say "no such name": `responseCode`), or
        /// why there is none.
        case answered(query: Int, Result<DNSResponse, Failure>)
    }

    private enum Phase: Sendable {
        case udp
        case tcp(connected: Bool, received: [UInt8])
    }

    private struct Query: Sendable {
        var question: DNSQuestion
        var id: UInt16
        var message: [UInt8]
        /// Tries made so far (the current one included).
        var tries: Int
        var phase: Phase
        var deadline: Instant
        /// Why the tries so far failed, for the final error.
        var failures: [String]
    }

    /// The configuration.
    public let configuration: Configuration
    private var queries: [Int: Query] = [:]
    private var nextHandle = 1
    private var actions = ActionQueue<Action>()
    private var random: SeededRandomNumberGenerator

    /// A resolver; `randomSeed` seeds the query IDs (pass a random one in production).
    public init(configuration: Configuration, randomSeed: UInt64) {
        self.configuration = configuration
        random = SeededRandomNumberGenerator(seed: randomSeed)
    }

    /// The next action to carry out, or nil.
    public mutating func pollAction() -> Action? { actions.next() }

    /// The earliest deadline of a query in flight.
    public func pollTimeout() -> Instant? { queries.values.map(\.deadline).min() }

    /// Starts a query; returns its handle.
    @discardableResult
    public mutating func resolve(_ question: DNSQuestion, now: Instant) -> Int {
        let handle = nextHandle
        nextHandle += 1
        let id = UInt16.random(in: 0...UInt16.max, using: &random)
        let message: [UInt8]
        do throws(DNSError) {
            message = try DNSMessage.query(question, id: id)
        } catch {
            actions.append(.answered(query: handle, .failure(Failure(message: error.message))))
            return handle
        }
        guard !configuration.nameServers.isEmpty else {
            actions.append(.answered(query: handle, .failure(Failure(message: "No nameserver is configured."))))
            return handle
        }
        queries[handle] = Query(
            question: question,
            id: id,
            message: message,
            tries: 0,
            phase: .udp,
            deadline: now,
            failures: []
        )
        nextTry(handle, now: now)
        return handle
    }

    /// Abandons a query (no answer follows).
    public mutating func cancel(_ handle: Int) {
        guard let query = queries.removeValue(forKey: handle) else { return }
        if case .tcp = query.phase { actions.append(.closeTCP(query: handle)) }
    }

    /// The nameserver of `query`'s current try.
    private func server(_ query: Query) -> Endpoint {
        configuration.nameServers[(query.tries - 1) % configuration.nameServers.count]
    }

    private mutating func nextTry(_ handle: Int, now: Instant) {
        guard var query = queries[handle] else { return }
        if case .tcp = query.phase { actions.append(.closeTCP(query: handle)) }
        guard query.tries < configuration.attempts * configuration.nameServers.count else {
            queries[handle] = nil
            let servers = configuration.nameServers.map(\.description).joined(separator: ", ")
            let reasons = query.failures.joined(separator: "; ")
            return actions.append(
                .answered(
                    query: handle,
                    .failure(
                        Failure(
                            message: "No answer for \(query.question.name) (\(query.question.type)) from \(servers) "
                                + "after \(query.tries) tries: \(reasons)."
                        )
                    )
                )
            )
        }
        query.tries += 1
        query.phase = .udp
        query.deadline = now + configuration.timeout
        queries[handle] = query
        actions.append(.sendUDP(query.message, to: server(query), query: handle))
    }

    /// A datagram for `query` arrived from `source`.
    public mutating func udpReceived(_ bytes: [UInt8], from source: Endpoint, query handle: Int, now: Instant) {
        guard let query = queries[handle], case .udp = query.phase, source == server(query) else { return }
        let response: DNSResponse
        do throws(DNSError) {
            response = try DNSMessage.parse(
                bytes,
                answering: query.question,
                id: query.id,
                limits: configuration.limits
            )
        } catch {
            // Not the answer to this query (another ID or question: ignored), or unreadable
            // (that server failed: the next try).
            if error.kind == .mismatched { return }
            return failTry(handle, "\(server(query)): \(error.message)", now: now)
        }
        if response.isTruncated {
            // Too large for UDP: the same server over TCP (RFC 7766).
            var updated = query
            updated.phase = .tcp(connected: false, received: [])
            updated.deadline = now + configuration.timeout
            queries[handle] = updated
            return actions.append(.openTCP(to: server(query), query: handle))
        }
        finish(handle, response, now: now)
    }

    /// `query`'s TCP connection is open.
    public mutating func tcpConnected(query handle: Int, now: Instant) {
        guard var query = queries[handle], case .tcp(false, let received) = query.phase else { return }
        query.phase = .tcp(connected: true, received: received)
        queries[handle] = query
        let length = query.message.count
        actions.append(.sendTCP([UInt8(length >> 8), UInt8(length & 0xFF)] + query.message, query: handle))
    }

    /// Bytes on `query`'s TCP connection.
    public mutating func tcpReceived(_ bytes: [UInt8], query handle: Int, now: Instant) {
        guard var query = queries[handle], case .tcp(true, var received) = query.phase else { return }
        received += bytes
        guard received.count <= configuration.limits.maximumMessageSize + 2 else {
            return failTry(handle, "\(server(query)): the TCP answer is too large", now: now)
        }
        guard received.count >= 2 else {
            query.phase = .tcp(connected: true, received: received)
            queries[handle] = query
            return
        }
        let length = Int(received[0]) << 8 | Int(received[1])
        guard received.count >= 2 + length else {
            query.phase = .tcp(connected: true, received: received)
            queries[handle] = query
            return
        }
        actions.append(.closeTCP(query: handle))
        query.phase = .udp  // the connection is closed now
        queries[handle] = query
        do throws(DNSError) {
            let response = try DNSMessage.parse(
                Array(received[2..<(2 + length)]),
                answering: query.question,
                id: query.id,
                limits: configuration.limits
            )
            finish(handle, response, now: now)
        } catch {
            failTry(handle, "\(server(query)) over TCP: \(error.message)", now: now)
        }
    }

    /// `query`'s TCP connection closed (or could not be opened).
    public mutating func tcpClosed(query handle: Int, error: String?, now: Instant) {
        guard var query = queries[handle], case .tcp = query.phase else { return }
        query.phase = .udp  // nothing to close
        queries[handle] = query
        failTry(handle, "\(server(query)) over TCP: \(error ?? "closed before answering")", now: now)
    }

    /// Runs the deadlines due at `now`.
    public mutating func handleTimeout(now: Instant) {
        for (handle, query) in queries where query.deadline <= now {
            failTry(
                handle,
                "\(server(query)): no answer within \(configuration.timeout.components.seconds) s",
                now: now
            )
        }
    }

    private mutating func failTry(_ handle: Int, _ reason: String, now: Instant) {
        queries[handle]?.failures.append(reason)
        nextTry(handle, now: now)
    }

    /// An answer: a server failure or refusal is that server's failure (the next try); any
    /// other answer (a name that does not exist included) is the query's.
    private mutating func finish(_ handle: Int, _ response: DNSResponse, now: Instant) {
        switch response.responseCode {
        case .serverFailure, .refused, .notImplemented, .formatError:
            guard let query = queries[handle] else { return }
            failTry(handle, "\(server(query)) answered \(response.responseCode)", now: now)
        case .noError, .nameError, .other:
            queries[handle] = nil
            actions.append(.answered(query: handle, .success(response)))
        }
    }
}
