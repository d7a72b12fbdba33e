import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A byte-level TCP relay on 127.0.0.1 between a client under test and a real server, which a
/// test can cut (both sides closed at once, as when a network drops and the kernel reports it)
/// or stall (nothing forwarded any more and nothing closed: a half-open link, as when a phone
/// changes networks). Connections made after a cut or stall are relayed normally. Releasing the
/// relay stops it (its threads hold only its inner state).
public final class TCPRelay: Sendable {
    /// HTTP requests the relay answers itself instead of passing them on, as proxies and
    /// corporate networks do.
    public enum Refusal: Hashable, Sendable {
        /// A WebSocket upgrade (`Upgrade: websocket`) is answered 403.
        case webSocketUpgrade
        /// A request for an event stream (`Accept: text/event-stream`) is answered with an HTML
        /// page, as a proxy that does not pass streaming responses.
        case eventStream
        /// A request with `Authorization: Bearer TOKEN` is answered 401, as a gateway that
        /// checks tokens does once one has expired.
        case bearerToken(String)
        /// As `bearerToken`, but only for the transport's requests (negotiate passes).
        case bearerTokenOnTransport(String)
    }

    public let port: Int
    private let core: Core

    /// A relay to 127.0.0.1:`upstreamPort`, listening on a free port, refusing the `refusals`
    /// (it then reads each connection's request head before connecting upstream). With `delay`
    /// each chunk is passed on that long after it was read, each way (a long link).
    public init(upstreamPort: Int, refusing refusals: Set<Refusal> = [], delay: Duration = .zero) throws {
        let (listener, port) = try boundLoopbackSocket(listening: true, reuseAddress: true)
        self.port = port
        core = Core(listener: listener, upstreamPort: upstreamPort, refusals: refusals, delay: delay)
        Thread.detachNewThread { [core] in core.acceptLoop() }
    }

    deinit {
        core.stop()
    }

    /// How many client connections were accepted so far.
    public var acceptedCount: Int { core.acceptedCount }

    /// How many requests were refused so far.
    public var refusedCount: Int { core.refusedCount }

    /// Closes every relayed connection now (both sides).
    public func cutAll() { core.cutAll() }

    /// Stops forwarding on every current connection without closing anything.
    public func stallAll() { core.stallAll() }

    /// Stops accepting and closes everything.
    public func stop() { core.stop() }

    /// The round trips seen on the relayed connections until `uptimeNanoseconds`
    /// (`DispatchTime`'s clock), counted on a relay with a `delay`: the server's flights, a
    /// flight being what the server sent between two sends of the client (the delay makes a
    /// client that waits for an answer show as a flight of its own).
    public func serverFlights(from start: UInt64 = 0, before uptimeNanoseconds: UInt64) -> Int {
        core.serverFlights(from: start, before: uptimeNanoseconds)
    }

    /// The relay's state and threads.
    ///
    /// Descriptors are shut down and closed only under `lock`, and a pair leaves `pairs` when its
    /// pump closes it; the accept loop alone closes the listener. A descriptor number, once closed,
    /// may be reused at once by another socket of the test process (another test's connection),
    /// which a late `shutdown` or `accept` on the old number would hit.
    private final class Core: @unchecked Sendable {
        // Shared state is guarded by `lock`; each relayed pair runs on its own thread.
        private let listener: Int32
        private let upstreamPort: Int
        private let refusals: Set<Refusal>
        private let delay: Duration
        private let lock = NSLock()
        /// What was passed on, in order: towards the client or not, and when.
        private var deliveries: [(toClient: Bool, time: UInt64)] = []
        private var refused = 0
        private var pairs: [Pair] = []
        private var stopped = false
        private var listenerClosed = false
        private var accepted = 0

        private final class Pair: @unchecked Sendable {
            // Flags guarded by the relay's lock.
            let client: Int32
            let server: Int32
            var stalled = false
            var closed = false

            init(client: Int32, server: Int32) {
                self.client = client
                self.server = server
            }
        }

        init(listener: Int32, upstreamPort: Int, refusals: Set<Refusal>, delay: Duration) {
            self.listener = listener
            self.upstreamPort = upstreamPort
            self.refusals = refusals
            self.delay = delay
        }

        func serverFlights(from start: UInt64, before time: UInt64) -> Int {
            lock.withLock {
                var flights = 0
                var previousToClient = false
                for delivery in deliveries where delivery.time >= start && delivery.time < time {
                    if delivery.toClient && !previousToClient { flights += 1 }
                    previousToClient = delivery.toClient
                }
                return flights
            }
        }

        private static func uptime() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

        var acceptedCount: Int {
            lock.withLock { accepted }
        }

        var refusedCount: Int {
            lock.withLock { refused }
        }

        /// Reads the client's request head (up to its blank line, 64 KiB at most, 5 s); answers it
        /// and returns nil when it is refused, else returns the bytes read (to pass on).
        private func screen(_ client: Int32) -> [UInt8]? {
            var head: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = Date().addingTimeInterval(5)
            while head.count < 65536, Date() < deadline {
                if head.count >= 4,
                    (0...(head.count - 4)).contains(where: { head[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) })
                {
                    break
                }
                var entry = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 50) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                head += buffer[..<count]
            }
            let text = String(decoding: head, as: UTF8.self).lowercased()
            let answer: String
            if refusals.contains(.webSocketUpgrade), text.contains("upgrade: websocket") {
                answer = "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nConnection: close\r\n\r\nForbidden"
            } else if refusals.contains(.eventStream), text.contains("accept: text/event-stream") {
                let page = "<html><body>Streaming is not allowed here.</body></html>"
                answer =
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n"
                    + "Connection: close\r\n\r\n" + page
            } else if refusals.contains(where: { refusal in
                let isNegotiate = text.prefix { $0 != "\r" }.contains("/negotiate")
                switch refusal {
                case .bearerToken(let token):
                    return text.contains("authorization: bearer \(token.lowercased())\r\n")
                case .bearerTokenOnTransport(let token):
                    return !isNegotiate && text.contains("authorization: bearer \(token.lowercased())\r\n")
                case .webSocketUpgrade, .eventStream:
                    return false
                }
            }) {
                answer = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            } else {
                return head
            }
            lock.withLock { refused += 1 }
            let bytes = Array(answer.utf8)
            _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            return nil
        }

        func cutAll() {
            lock.withLock {
                for pair in pairs {
                    pair.closed = true
                    shutdown(pair.client, Int32(SHUT_RDWR))
                    shutdown(pair.server, Int32(SHUT_RDWR))
                }
                pairs.removeAll()
            }
        }

        func stallAll() {
            lock.withLock {
                for pair in pairs { pair.stalled = true }
            }
        }

        func stop() {
            lock.withLock {
                guard !stopped else { return }
                stopped = true
                // Wakes the accept loop, which then closes the listener.
                if !listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            }
            cutAll()
        }

        func acceptLoop() {
            defer {
                lock.withLock {
                    listenerClosed = true
                    close(listener)
                }
            }
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if lock.withLock({ stopped }) { return }
                    if errno == EINTR { continue }
                    return
                }
                guard refusals.isEmpty else {
                    lock.withLock { accepted += 1 }
                    Thread.detachNewThread { [self] in screenThenRelay(client) }
                    continue
                }
                guard let server = connectedLoopbackSocket(port: upstreamPort) else {
                    close(client)
                    continue
                }
                let pair = Pair(client: client, server: server)
                let isStopped = lock.withLock {
                    accepted += 1
                    if !stopped { pairs.append(pair) }
                    return stopped
                }
                if isStopped {
                    close(client)
                    close(server)
                    return
                }
                Thread.detachNewThread { [self] in pump(pair) }
            }
        }

        /// Writes all of `bytes` to `fd` (stops early if the socket fails).
        private func sendAll(_ bytes: ArraySlice<UInt8>, to fd: Int32) {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes {
                    send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                if written <= 0 { return }
                offset += written
            }
        }

        /// Screens the connection's request; relays it if it passes.
        private func screenThenRelay(_ client: Int32) {
            guard let head = screen(client), !lock.withLock({ stopped }),
                let server = connectedLoopbackSocket(port: upstreamPort)
            else {
                close(client)
                return
            }
            sendAll(head[...], to: server)
            let pair = Pair(client: client, server: server)
            let isStopped = lock.withLock {
                if !stopped { pairs.append(pair) }
                return stopped
            }
            if isStopped {
                close(client)
                close(server)
                return
            }
            pump(pair)
        }

        /// Forwards both ways until either side ends or the pair is cut; forwards nothing while
        /// stalled.
        private func pump(_ pair: Pair) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            defer {
                lock.withLock {
                    pair.closed = true
                    pairs.removeAll { $0 === pair }
                    close(pair.client)
                    close(pair.server)
                }
            }
            // Chunks read and not yet passed on (with a delay): when, where to, what.
            var due: [(time: UInt64, toClient: Bool, bytes: [UInt8])] = []
            let delayNanoseconds =
                UInt64(delay.components.seconds) * 1_000_000_000
                + UInt64(delay.components.attoseconds / 1_000_000_000)
            while true {
                let (stalled, closed) = lock.withLock { (pair.stalled, pair.closed) }
                if closed { return }
                if stalled {
                    usleep(20_000)
                    continue
                }
                let now = Self.uptime()
                while let first = due.first, first.time <= now {
                    due.removeFirst()
                    // Noted before it goes: the other side may act on it (and a test read the
                    // time) before this thread runs again.
                    if delayNanoseconds > 0 { lock.withLock { deliveries.append((first.toClient, Self.uptime())) } }
                    sendAll(first.bytes[...], to: first.toClient ? pair.client : pair.server)
                }
                var fds = [
                    pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: pair.server, events: Int16(POLLIN), revents: 0),
                ]
                let wait = due.first.map { Int32(min(50, max(0, Int64($0.time) - Int64(now)) / 1_000_000 + 1)) } ?? 50
                let ready = poll(&fds, 2, wait)
                if ready <= 0 { continue }
                for (index, entry) in fds.enumerated() where entry.revents != 0 {
                    let from = index == 0 ? pair.client : pair.server
                    let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 {
                        // One side ended (or failed): what it sent before goes on, when due; then
                        // the deferred close ends the other side.
                        for chunk in due {
                            let wait = Int64(chunk.time) - Int64(Self.uptime())
                            if wait > 0 { usleep(UInt32(wait / 1000)) }
                            sendAll(chunk.bytes[...], to: chunk.toClient ? pair.client : pair.server)
                        }
                        return
                    }
                    due.append((Self.uptime() + delayNanoseconds, index == 1, Array(buffer[..<count])))
                }
            }
        }
    }
}

/// A port on 127.0.0.1 that accepts connections (the kernel completes them) and never reads or
/// answers: a server that hangs.
public final class SilentListener: @unchecked Sendable {
    public let port: Int
    private let fd: Int32

    public init() throws {
        (fd, port) = try boundLoopbackSocket(listening: true)
    }

    deinit {
        close(fd)
    }
}

/// A port on 127.0.0.1 where a connect never completes: a listener with a zero backlog whose
/// queue is already full, so the kernel drops further SYNs (as with a dead host or a broken route,
/// where the connect hangs until its timeout rather than being refused).
public final class SwallowingListener: @unchecked Sendable {
    public let port: Int
    private let fd: Int32
    private let filler: Int32

    public init() throws {
        (fd, port) = try boundLoopbackSocket(listening: true, backlog: 0)
        // The one connection a zero backlog queues (completed by the kernel, never accepted).
        guard let filler = connectedLoopbackSocket(port: port) else {
            close(fd)
            throw TestServerError("cannot fill the listener's queue")
        }
        self.filler = filler
    }

    deinit {
        close(filler)
        close(fd)
    }
}
