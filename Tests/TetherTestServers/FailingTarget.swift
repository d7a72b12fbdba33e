import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP port on 127.0.0.1 that accepts every connection and ends it at once, as a load
/// balancer with no server behind it does: with an orderly close (FIN), or with a reset (RST,
/// `SO_LINGER` 0). Counts the connections it took; stops when released.
public final class FailingTarget: @unchecked Sendable {
    /// How each connection ends.
    public enum Ending: Sendable {
        case close
        case reset
    }

    public let port: Int
    private let listener: Int32
    // Guarded by `lock`.
    private let lock = NSLock()
    private var taken = 0
    private var stopped = false

    public init(_ ending: Ending) throws {
        let (fd, port) = try boundLoopbackSocket(listening: true)
        listener = fd
        self.port = port
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }  // the listener was shut down
                if ending == .reset {
                    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                    setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                }
                close(client)
                lock.withLock { taken += 1 }
            }
        }
    }

    /// The connections taken so far.
    public var connections: Int { lock.withLock { taken } }

    public func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }
}
