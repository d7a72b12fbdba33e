package import Dispatch
import Synchronization
@_spi(TetherInternal) package import TetherCore
import TetherDNS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One non-blocking TCP connection driven by Dispatch (and, as `SocketReading` chooses, the
/// process's shared read threads), for the runners.
///
/// It resolves the host (getaddrinfo, on a global queue because it blocks) and connects as RFC
/// 8305 (Happy Eyeballs) says: the addresses in the resolver's order with the families
/// interleaved, a new attempt every `attemptDelay` (250 ms) while earlier ones are still under way,
/// or at once when one fails; the first to connect wins and the others are dropped. Each attempt
/// has its own connect timeout. So an address that swallows the connect (a broken IPv6 route, a
/// dead host) delays the connection by 250 ms, not by the timeout. Then it reads when a
/// `ReadThreads` thread (or a `DispatchSourceRead`) sees input, and writes directly, buffering what the
/// kernel does not take and finishing it from a `DispatchSourceWrite`. Every event is delivered on `queue`, never from
/// inside a call into the connection, so a runner never re-enters its machine. After `close()`
/// nothing more is delivered.
///
/// `@unchecked Sendable` because Dispatch needs to carry it into handlers: every member is read
/// and written only on `queue` (the resolver's result hops back onto it before use).
package final class TCPConnection: @unchecked Sendable {
    package enum Event {
        case connected
        case received([UInt8])
        /// Everything written was taken by the kernel (after a write had to wait).
        case drained
        /// The connection ended: nil for an orderly end of stream, else what went wrong.
        case closed(String?)
    }

    /// The queues host names are resolved on (`getaddrinfo` blocks): a few, shared by every
    /// connection, so that many connections starting at once cost a bounded number of threads.
    private static let resolverQueues = (0..<4).map {
        DispatchQueue(label: "tether.resolver.\($0)", target: DispatchQueue.global())
    }
    private static let nextResolver = Atomic<Int>(0)

    private static func resolverQueue() -> DispatchQueue {
        let index = nextResolver.wrappingAdd(1, ordering: .relaxed).oldValue
        return resolverQueues[index % resolverQueues.count]
    }

    /// RFC 8305's "Connection Attempt Delay" (its recommended value).
    package static let defaultAttemptDelay = Duration.milliseconds(250)

    /// A connect under way (kept by its socket): the source that says when it completes, and its
    /// timeout.
    private struct Attempt {
        let source: any DispatchSourceWrite
        let timer: any DispatchSourceTimer
    }

    private let queue: DispatchQueue
    private let endpoint: Endpoint
    /// Resolve through these nameservers (A and AAAA) instead of the system's resolver.
    private let nameServers: [Endpoint]?
    private let resolutionLog: (@Sendable (String) -> Void)?
    private var lookup: DNSLookup?
    private var addressAnswers: [(DNSRecordType, Result<DNSResponse, DNSResolverMachine.Failure>)] = []
    private let connectTimeout: Duration
    private let attemptDelay: Duration
    @exclusivity(unchecked) private var onEvent: ((Event) -> Void)?
    /// Where the bytes read go directly, when set (by a TCP transport with no TLS layer to pass
    /// them through: one closure hop per input instead of two); else as `.received` to `onEvent`.
    /// Dropped with `onEvent` when the connection closes or ends.
    @exclusivity(unchecked) package var onReceived: (([UInt8]) -> Void)?

    private var addresses: [SocketAddress] = []
    private var nextAddress = 0
    private var lastError = "no address"
    /// The connects under way, by socket.
    private var attempts: [Int32: Attempt] = [:]
    /// Starts the next attempt if none has connected by then.
    private var attemptDelayTimer: (any DispatchSourceTimer)?
    @exclusivity(unchecked) private var socket: Int32 = -1
    private let reading: SocketReading
    private var readSource: (any DispatchSourceRead)?
    /// The read source is suspended: a lingering connection saw the end of the peer's stream.
    private var readSourceSuspended = false
    /// A lingering connection wrote everything and ended its side of the stream.
    private var outputEnded = false
    /// A lingering connection read the end of the peer's stream (or a failure).
    private var inputEnded = false
    @exclusivity(unchecked) private var readWatch: ReadThreads.Watch?
    private var writeSource: (any DispatchSourceWrite)?
    @exclusivity(unchecked) private var writeSourceRunning = false
    private var isConnected = false
    @exclusivity(unchecked) private var isClosed = false
    /// Closed by the owner, but still writing what was queued (see `close(afterFlushing:)`).
    @exclusivity(unchecked) private var lingering = false
    @exclusivity(unchecked) private var pending: [UInt8] = []
    @exclusivity(unchecked) private var pendingOffset = 0
    /// Something was written since the last input (`acknowledgeStreamingInput`).
    @exclusivity(unchecked) private var wroteSinceInput = true
    /// Inputs acknowledged at once (`acknowledgeStreamingInput`; on the queue), for tests.
    @exclusivity(unchecked) package private(set) var streamingAcknowledgements = 0
    /// Bytes `hold` keeps for the next `flushHeld()`.
    @exclusivity(unchecked) private var held: [UInt8] = []
    /// The most bytes taken from the socket by one read. No buffer is kept between reads: each
    /// read allocates exactly what the kernel holds (the array handed up), so an idle connection
    /// costs no read buffer.
    private let maximumReadSize: Int
    /// The longest a graceful close (`close(afterFlushing: true)`) keeps the socket.
    private let gracefulCloseTimeout: Duration

    /// Bytes sent (or held) but not yet taken by the kernel.
    package var pendingWriteCount: Int { queuedCount + held.count }

    /// Bytes the kernel refused so far, waiting for the socket to be writable.
    private var queuedCount: Int { pending.count - pendingOffset }

    /// Held bytes are written once they reach this many, without waiting for `flushHeld()`.
    static let heldLimit = 64 * 1024

    /// The socket's input is waited for by the shared read threads (not a Dispatch source).
    var readsOnThread: Bool { readWatch != nil }

    /// The connection has ended and holds nothing that could report again: no attempt, no timer,
    /// no socket (read on `queue`; for tests).
    var hasEndedForGood: Bool {
        isClosed && onEvent == nil && attempts.isEmpty && attemptDelayTimer == nil && socket < 0
    }

    /// A connection to `endpoint`; `onEvent` runs on `queue`. Call `start()` to connect.
    package init(
        endpoint: Endpoint,
        queue: DispatchQueue,
        connectTimeout: Duration,
        attemptDelay: Duration = TCPConnection.defaultAttemptDelay,
        maximumReadSize: Int,
        reading: SocketReading = .default,
        gracefulCloseTimeout: Duration = .seconds(2),
        nameServers: [Endpoint]? = nil,
        resolutionLog: (@Sendable (String) -> Void)? = nil,
        onEvent: @escaping (Event) -> Void
    ) {
        self.reading = reading
        self.gracefulCloseTimeout = gracefulCloseTimeout
        self.resolutionLog = resolutionLog
        self.endpoint = endpoint
        self.nameServers = nameServers
        self.queue = queue
        self.connectTimeout = connectTimeout
        self.attemptDelay = attemptDelay
        self.onEvent = onEvent
        self.maximumReadSize = max(maximumReadSize, 512)
    }

    /// Dropped without `close()`: the socket and its watchers are released all the same.
    deinit {
        if !isClosed {
            isClosed = true
            tearDown()
        }
    }

    /// Resolves and connects (asynchronously).
    package func start() {
        let host = endpoint.host
        let port = endpoint.port
        if let address = SocketAddress.literal(host: host, port: port) {
            queue.async { [self] in connect(to: [address]) }
            return
        }
        if let nameServers { return resolve(host: host, port: port, through: nameServers) }
        Self.resolverQueue().async { [self] in
            let result = SocketAddress.resolve(host: host, port: port)
            queue.async { [self] in
                switch result {
                case .success(let addresses): connect(to: addresses)
                case .failure(let message): fail("cannot resolve \(host): \(message)")
                }
            }
        }
    }

    /// Resolves `host` through `nameServers` (`DNSLookup`): AAAA and A at once, then the addresses
    /// of both (IPv6 first, RFC 8305 §3) are raced.
    private func resolve(host: String, port: Int, through nameServers: [Endpoint]) {
        let lookup = DNSLookup(nameServers: nameServers)
        self.lookup = lookup
        for type in [DNSRecordType.aaaa, .a] {
            lookup.resolve(DNSQuestion(name: host, type: type)) { [weak self] result in
                guard let self else { return }
                queue.async { [self] in addressesResolved(type, result, host: host, port: port) }
            }
        }
    }

    /// One of the two address lookups answered (on `queue`); once both have, connect or fail.
    private func addressesResolved(
        _ type: DNSRecordType,
        _ result: Result<DNSResponse, DNSResolverMachine.Failure>,
        host: String,
        port: Int
    ) {
        addressAnswers.append((type, result))
        guard addressAnswers.count == 2, !isClosed else { return }
        lookup = nil
        var addresses: [SocketAddress] = []
        var problems: [String] = []
        for (type, answer) in addressAnswers.sorted(by: { $0.0 == .aaaa && $1.0 != .aaaa }) {
            switch answer {
            case .success(let response):
                let records = response.records(for: host, type: type)
                resolutionLog?(
                    "DNS: \(host) \(type): \(records.isEmpty ? "none (\(response.responseCode))" : "\(records)")."
                )
                addresses += records.compactMap { SocketAddress($0, port: port) }
                if response.responseCode == .nameError { problems.append("\(type): no such name") }
            case .failure(let failure):
                resolutionLog?("DNS: \(host) \(type): \(failure.message)")
                problems.append("\(type): \(failure.message)")
            }
        }
        addressAnswers = []
        guard !addresses.isEmpty else {
            return fail(
                "cannot resolve \(host): "
                    + (problems.isEmpty ? "no A or AAAA records" : problems.joined(separator: "; "))
            )
        }
        connect(to: addresses)
    }

    /// Connects to `addresses` (already resolved; on `queue`).
    package func connect(to addresses: [SocketAddress]) {
        guard !isClosed else { return }
        self.addresses = SocketAddress.interleavingFamilies(addresses)
        startNextAttempt()
    }

    /// Writes `bytes` (queued behind anything not yet written).
    package func send(_ bytes: [UInt8]) {
        guard !isClosed, isConnected, !bytes.isEmpty else { return }
        flushHeld()
        writeOrQueue(bytes[...])
    }

    /// Keeps `bytes` to write with the next `flushHeld()` (or `send`), so that a burst leaves in
    /// one write; at `heldLimit` they are written at once.
    package func hold(_ bytes: [UInt8]) {
        guard !isClosed, isConnected, !bytes.isEmpty else { return }
        if held.isEmpty {
            // The first bytes are kept as they are (no copy); more are appended to them.
            held = bytes
        } else {
            held += bytes
        }
        if held.count >= Self.heldLimit { flushHeld() }
    }

    /// Writes what `hold` kept.
    package func flushHeld() {
        guard !held.isEmpty else { return }
        writeOrQueue(held[...])
        held.removeAll(keepingCapacity: false)
    }

    private func writeOrQueue(_ bytes: ArraySlice<UInt8>) {
        if queuedCount > 0 {
            pending += bytes
            return
        }
        let written = write(bytes)
        guard written >= 0 else { return }
        if written < bytes.count {
            pending = Array(bytes.dropFirst(written))
            pendingOffset = 0
            startWriteSource()
        }
    }

    /// Closes; no event follows. With `afterFlushing` the close is graceful, so that a last
    /// `</stream:stream>`, WebSocket close or TLS close_notify is not lost: bytes still waiting
    /// for the kernel go out, then our side of the stream ends (the peer reads its end after the
    /// last byte), and the socket stays open, reading and dropping what the peer still sends,
    /// until the peer ends its side too, for at most `gracefulCloseTimeout`. A socket closed at
    /// once with input unread, or input arriving after it, would send a reset, which drops what
    /// the kernel has not delivered yet.
    package func close(afterFlushing: Bool = false) {
        guard !isClosed else { return }
        if afterFlushing, isConnected { flushHeld() }
        isClosed = true
        onEvent = nil
        onReceived = nil
        guard afterFlushing, isConnected, writeSource != nil, gracefulCloseTimeout > .zero else { return tearDown() }
        lingering = true
        let timeout = DispatchTimeInterval.nanoseconds(Int(clamping: gracefulCloseTimeout.totalNanoseconds))
        queue.asyncAfter(deadline: .now() + timeout) { [self] in stopLingering() }
        if queuedCount == 0 { endOutput() }
    }

    /// A lingering connection wrote everything: ends our side of the stream, and closes once the
    /// peer has ended its side too.
    private func endOutput() {
        outputEnded = true
        _ = shutdown(socket, Int32(SHUT_WR))
        if inputEnded { stopLingering() }
    }

    private func stopLingering() {
        guard lingering else { return }
        lingering = false
        tearDown()
    }

    // MARK: - Connecting

    /// Starts a connect to the next address (and arms the attempt delay for the one after), or,
    /// with no address left and none under way, fails.
    private func startNextAttempt() {
        attemptDelayTimer?.cancel()
        attemptDelayTimer = nil
        guard !isClosed, !isConnected else { return }
        while nextAddress < addresses.count {
            let address = addresses[nextAddress]
            nextAddress += 1
            let fd = address.makeSocket()
            guard fd >= 0 else {
                lastError = Self.errorText(errno)
                continue
            }
            if address.withSockaddr({ systemConnect(fd, $0, $1) }) == 0 {
                return won(fd)
            }
            guard errno == EINPROGRESS else {
                lastError = Self.errorText(errno)
                _ = systemClose(fd)
                continue
            }
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [weak self] in self?.attemptFinished(fd) }
            let timer = after(connectTimeout) { [weak self] in self?.attemptTimedOut(fd) }
            attempts[fd] = Attempt(source: source, timer: timer)
            source.resume()
            if nextAddress < addresses.count {
                attemptDelayTimer = after(attemptDelay) { [weak self] in self?.startNextAttempt() }
            }
            return
        }
        if attempts.isEmpty {
            fail("cannot connect to \(endpoint): \(lastError)")
        }
    }

    /// A one-shot timer on `queue`, started.
    private func after(_ delay: Duration, _ body: @escaping () -> Void) -> any DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(delay.totalNanoseconds)))
        timer.setEventHandler(handler: body)
        timer.resume()
        return timer
    }

    private func attemptFinished(_ fd: Int32) {
        guard !isClosed, !isConnected, attempts[fd] != nil else { return }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        if error == 0 {
            endAttempt(fd, closingSocket: false)
            won(fd)
        } else {
            lastError = Self.errorText(error)
            endAttempt(fd, closingSocket: true)
            startNextAttempt()
        }
    }

    private func attemptTimedOut(_ fd: Int32) {
        guard !isClosed, !isConnected, attempts[fd] != nil else { return }
        lastError = "timed out after \(connectTimeout)"
        endAttempt(fd, closingSocket: true)
        startNextAttempt()
    }

    /// `fd` connected: the other attempts are dropped and it becomes the connection.
    private func won(_ fd: Int32) {
        endAllAttempts()
        socket = fd
        connected()
    }

    /// Ends the wait for the connect on `fd`; with `closingSocket`, the socket is closed once its
    /// source's cancellation has completed (Dispatch's rule: never close a descriptor a source
    /// still watches, or a new socket reusing its number could be unregistered by the old source).
    private func endAttempt(_ fd: Int32, closingSocket: Bool) {
        guard let attempt = attempts.removeValue(forKey: fd) else { return }
        attempt.timer.cancel()
        if closingSocket { attempt.source.setCancelHandler { _ = systemClose(fd) } }
        attempt.source.cancel()
    }

    /// Drops every attempt under way (closing its socket) and the attempt delay.
    private func endAllAttempts() {
        attemptDelayTimer?.cancel()
        attemptDelayTimer = nil
        for fd in Array(attempts.keys) { endAttempt(fd, closingSocket: true) }
    }

    private func connected() {
        isConnected = true
        let fd = socket
        if case .sharedThreads(let count, let tickWindow) = reading {
            readWatch = ReadThreads.shared(count: count, tickWindow: tickWindow)?.watch(
                socket: fd,
                queue: queue,
                handler: { [weak self] in self?.readable() ?? .stopWatching },
                failed: { [weak self] error in
                    self?.fail("the socket could not be watched for input: \(Self.errorText(error))")
                }
            )
        }
        if readWatch == nil {
            let read = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            read.setEventHandler { [weak self] in _ = self?.readable() }
            readSource = read
            read.resume()
        }
        let write = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        write.setEventHandler { [weak self] in self?.writable() }
        writeSource = write
        writeSourceRunning = false
        deliver(.connected)
    }

    // MARK: - Reading and writing

    /// Reads what the socket has (up to `maximumReadSize`); `.stopWatching` once the connection is
    /// closed (nothing more to read), `.more` when the read filled the buffer.
    private func readable() -> ReadThreads.Handled {
        guard !isClosed else { return lingering ? discardWhileLingering() : .stopWatching }
        // Read into the thread's buffer and copied out at the size that arrived (more than
        // `maximumReadSize` waits for the next read).
        let socket = socket
        let (count, bytes) = ReadScratch.withBuffer(capacity: maximumReadSize) { scratch -> (Int, [UInt8]) in
            let count = systemRead(socket, scratch.baseAddress, scratch.count)
            return (count, ReadScratch.bytes(scratch, count: count))
        }
        var handled = ReadThreads.Handled.drained
        if count > 0 {
            if count >= maximumReadSize { handled = .more }
            if !wroteSinceInput { acknowledgeStreamingInput() }
            wroteSinceInput = false
            if let onReceived {
                onReceived(bytes)
            } else {
                deliver(.received(bytes))
            }
        } else if count == 0 {
            fail(nil)
        } else if errno == EINTR {
            handled = .more
        } else if errno != EAGAIN && errno != EWOULDBLOCK {
            fail(Self.errorText(errno))
        }
        return isClosed ? .stopWatching : handled
    }

    /// While a closed connection lingers (`close(afterFlushing:)`): reads what arrives and drops
    /// it, so that the socket is never closed with input unread, and a Dispatch read source does
    /// not fire again and again for input nobody takes. At the end of the peer's stream (or a
    /// failure) it stops watching, and closes if our side has ended too.
    private func discardWhileLingering() -> ReadThreads.Handled {
        let size = 4096
        let count = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer in
            systemRead(socket, buffer.baseAddress, buffer.count)
        }
        if count > 0 { return count >= size ? .more : .drained }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .drained }
        if count < 0 && errno == EINTR { return .more }
        inputEnded = true
        if outputEnded {
            stopLingering()
            return .stopWatching
        }
        if let readSource, !readSourceSuspended {
            readSource.suspend()
            readSourceSuspended = true
        }
        return .stopWatching
    }

    private func writable() {
        guard !isClosed || lingering else { return }
        let written = write(pending[pendingOffset...])
        guard written >= 0 else { return stopLingering() }
        pendingOffset += written
        if queuedCount == 0 {
            // An idle connection keeps no write buffer either.
            pending.removeAll()
            pendingOffset = 0
            if writeSourceRunning {
                writeSource?.suspend()
                writeSourceRunning = false
            }
            if lingering { return endOutput() }
            deliver(.drained)
        }
    }

    private func startWriteSource() {
        guard !writeSourceRunning, let writeSource else { return }
        writeSource.resume()
        writeSourceRunning = true
    }

    /// Input that follows input with nothing written in between (a server streaming to us, not
    /// answering a request) is acknowledged at once, on Linux (`TCP_QUICKACK`, which the kernel
    /// clears again by itself): a delayed acknowledgement would hold back the last small segment
    /// of a burst from a server that uses Nagle's algorithm until the delayed-ACK timer fires (40
    /// ms), for every burst (`Specs/performance.md`, "The end of a burst"). After a request the
    /// acknowledgement stays delayed, to go with our next bytes.
    private func acknowledgeStreamingInput() {
        #if os(Linux)
            var one: Int32 = 1
            let size = socklen_t(MemoryLayout<Int32>.size)
            if setsockopt(socket, Int32(IPPROTO_TCP), Int32(TCP_QUICKACK), &one, size) == 0 {
                streamingAcknowledgements += 1
            }
        #endif
    }

    /// Writes what the kernel takes now; -1 after a failure (reported).
    private func write(_ bytes: ArraySlice<UInt8>) -> Int {
        let result = bytes.withUnsafeBytes { buffer -> Int in
            systemSend(socket, buffer.baseAddress, buffer.count)
        }
        if result > 0 { wroteSinceInput = true }
        if result >= 0 { return result }
        if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return 0 }
        let error = Self.errorText(errno)
        queue.async { [self] in fail(error) }
        return -1
    }

    // MARK: - Ending

    private func deliver(_ event: Event) {
        guard !isClosed else { return }
        onEvent?(event)
    }

    /// Ends with `error` (nil: end of stream), reporting it once.
    private func fail(_ error: String?) {
        guard !isClosed else { return }
        isClosed = true
        let handler = onEvent
        onEvent = nil
        onReceived = nil
        tearDown()
        handler?(.closed(error))
    }

    private func tearDown() {
        endAllAttempts()
        // The descriptor is closed once both sources are canceled (Dispatch's rule) and no read
        // thread handles it any more.
        let fd = socket
        socket = -1
        var sources: [any DispatchSourceProtocol] = []
        if let readSource {
            if readSourceSuspended { readSource.resume() }
            sources.append(readSource)
        }
        if let writeSource {
            if !writeSourceRunning { writeSource.resume() }
            sources.append(writeSource)
        }
        let watch = readWatch
        readSource = nil
        readSourceSuspended = false
        outputEnded = false
        inputEnded = false
        readWatch = nil
        writeSource = nil
        writeSourceRunning = false
        guard fd >= 0 else { return }
        guard !sources.isEmpty || watch != nil else {
            _ = systemClose(fd)
            return
        }
        let remaining = SourceCountdown(sources.count + (watch == nil ? 0 : 1)) { _ = systemClose(fd) }
        for source in sources {
            source.setCancelHandler { remaining.done() }
            source.cancel()
        }
        watch?.cancel { remaining.done() }
    }

    package static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// Runs `body` after `done()` was called `count` times (cancel handlers run on one queue).
private final class SourceCountdown: @unchecked Sendable {
    // Mutated only from the cancel handlers, which run on the connection's serial queue (a read
    // thread's too).
    private var count: Int
    private let body: () -> Void

    package init(_ count: Int, _ body: @escaping () -> Void) {
        self.count = count
        self.body = body
    }

    package func done() {
        count -= 1
        if count == 0 { body() }
    }
}
