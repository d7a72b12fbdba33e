import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A byte-level TCP relay on 127.0.0.1 between a client under test and a real server, which a
/// test can cut (both sides closed at once, as when a network drops and the kernel reports it)
/// or stall (nothing forwarded any more and nothing closed: a half-open link, as when a phone
/// changes networks). Connections made after a cut or stall are relayed normally.
public final class TCPRelay: @unchecked Sendable {
    // Shared state is guarded by `lock`; each relayed pair runs on its own thread.
    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var pairs: [Pair] = []
    private var stopped = false
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

    /// A relay to 127.0.0.1:`upstreamPort`, listening on a free port.
    public init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listener, port) = try boundLoopbackSocket(listening: true, reuseAddress: true)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit {
        stop()
    }

    /// How many client connections were accepted so far.
    public var acceptedCount: Int {
        lock.withLock { accepted }
    }

    /// Closes every relayed connection now (both sides).
    public func cutAll() {
        let current = lock.withLock {
            let current = pairs
            pairs.removeAll()
            for pair in current { pair.closed = true }
            return current
        }
        for pair in current {
            shutdown(pair.client, Int32(SHUT_RDWR))
            shutdown(pair.server, Int32(SHUT_RDWR))
        }
    }

    /// Stops forwarding on every current connection without closing anything.
    public func stallAll() {
        lock.withLock {
            for pair in pairs { pair.stalled = true }
        }
    }

    /// Stops accepting and closes everything.
    public func stop() {
        let shouldClose = lock.withLock {
            let first = !stopped
            stopped = true
            return first
        }
        guard shouldClose else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        cutAll()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if lock.withLock({ stopped }) { return }
                if errno == EINTR { continue }
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = loopbackAddress(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else {
                close(client)
                close(server)
                continue
            }
            let pair = Pair(client: client, server: server)
            lock.withLock {
                accepted += 1
                pairs.append(pair)
            }
            Thread.detachNewThread { [self] in pump(pair) }
        }
    }

    /// Forwards both ways until either side ends or the pair is cut; forwards nothing while
    /// stalled.
    private func pump(_ pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        defer {
            close(pair.client)
            close(pair.server)
        }
        while true {
            let (stalled, closed) = lock.withLock { (pair.stalled, pair.closed) }
            if closed { return }
            if stalled {
                usleep(20_000)
                continue
            }
            var fds = [
                pollfd(fd: pair.client, events: Int16(POLLIN), revents: 0),
                pollfd(fd: pair.server, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, 2, 50)
            if ready <= 0 { continue }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = index == 0 ? pair.client : pair.server
                let to = index == 0 ? pair.server : pair.client
                let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if count <= 0 {
                    lock.withLock { pair.closed = true }
                    shutdown(pair.client, Int32(SHUT_RDWR))
                    shutdown(pair.server, Int32(SHUT_RDWR))
                    return
                }
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes {
                        send(to, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL))
                    }
                    if written <= 0 { break }
                    offset += written
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
