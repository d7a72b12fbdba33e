import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a connection waits for its socket's input (`ConnectionOptions.socketReading`).
public enum SocketReading: Sendable, Equatable {
    /// A thread per socket, blocked in `poll` until input comes, handles it on the connection's
    /// queue itself (`queue.sync`, which an idle serial queue runs right there) and resumes a task
    /// on the connection's `ConnectionExecutor` there too: one thread wake-up per input, as with a
    /// blocking client. While `limit` sockets of the process (of any client) have such a thread
    /// already, a new socket gets a Dispatch source instead.
    case threadPerSocket(limit: Int)
    /// A Dispatch read source per socket, served by Dispatch's shared threads: no thread of its
    /// own. On Linux an input then reaches the queue through Dispatch's event thread and a worker,
    /// and the event thread is woken again to watch the socket anew: three thread wake-ups per
    /// input, tens of µs more per answer on a busy machine.
    case dispatchSource

    /// The default: a thread for each of the process's first 64 sockets, Dispatch sources beyond.
    /// A client app holds a few connections, whose latency counts; an app that holds thousands
    /// pays no thread for each.
    public static let `default` = SocketReading.threadPerSocket(limit: 64)
}

/// `SocketReading.threadPerSocket`: a thread that waits for `socket`'s input and runs `handler`
/// on `queue` (from that thread) whenever there is some, until `cancel(then:)`.
///
/// The descriptor stays open while the thread may poll it: `cancel(then:)` wakes the thread
/// through a pipe, and `then` (which closes the socket) runs on `queue` only after the thread has
/// stopped watching, so a new socket that reuses the number is never polled by an old thread.
final class ReadThread: Sendable {
    private enum State {
        case running(onStopped: (@Sendable () -> Void)?)
        case stopped
    }

    private let socket: Int32
    private let queue: DispatchQueue
    /// Runs on `queue` when the socket has input; false: stop watching it (the connection is
    /// closing), and wait only for `cancel(then:)`.
    private let handler: @Sendable () -> Bool
    /// The wake-up pipe: `cancel` writes to `wakeWrite`, the thread polls `wakeRead`.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let state = Mutex<State>(.running(onStopped: nil))

    /// The read threads running in the process (`SocketReading.threadPerSocket`'s limit).
    private static let running = Atomic<Int>(0)

    /// A thread watching `socket`, started; nil when `limit` read threads run already, or the
    /// system gives no pipe or thread (the caller then uses a Dispatch source).
    static func start(
        socket: Int32,
        queue: DispatchQueue,
        limit: Int,
        handler: @escaping @Sendable () -> Bool
    ) -> ReadThread? {
        guard running.add(1, ordering: .relaxed).oldValue < limit else {
            running.subtract(1, ordering: .relaxed)
            return nil
        }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            running.subtract(1, ordering: .relaxed)
            return nil
        }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let watcher = ReadThread(socket: socket, queue: queue, wakeRead: fds[0], wakeWrite: fds[1], handler: handler)
        guard watcher.startThread() else {
            running.subtract(1, ordering: .relaxed)
            return nil  // the pipe closes with `watcher`
        }
        return watcher
    }

    private init(
        socket: Int32,
        queue: DispatchQueue,
        wakeRead: Int32,
        wakeWrite: Int32,
        handler: @escaping @Sendable () -> Bool
    ) {
        self.socket = socket
        self.queue = queue
        self.wakeRead = wakeRead
        self.wakeWrite = wakeWrite
        self.handler = handler
    }

    deinit {
        _ = systemClose(wakeRead)
        _ = systemClose(wakeWrite)
    }

    /// Stops the thread; `then` runs on `queue` once it no longer watches the socket.
    func cancel(then: @escaping @Sendable () -> Void) {
        let stoppedAlready = state.withLock { state -> Bool in
            switch state {
            case .running:
                state = .running(onStopped: then)
                return false
            case .stopped:
                return true
            }
        }
        if stoppedAlready { return queue.async(execute: then) }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func startThread() -> Bool {
        let context = Unmanaged.passRetained(self).toOpaque()
        #if canImport(Darwin)
            var thread: pthread_t?
        #else
            var thread = pthread_t()
        #endif
        let started = pthread_create(
            &thread,
            nil,
            { context in
                #if canImport(Darwin)
                    let watcher = Unmanaged<ReadThread>.fromOpaque(context).takeRetainedValue()
                #else
                    let watcher = Unmanaged<ReadThread>.fromOpaque(context!).takeRetainedValue()
                #endif
                watcher.run()
                return nil
            },
            context
        )
        guard started == 0 else {
            Unmanaged<ReadThread>.fromOpaque(context).release()
            return false
        }
        #if canImport(Darwin)
            if let thread { pthread_detach(thread) }
        #else
            pthread_detach(thread)
        #endif
        return true
    }

    /// The threads' name (in `top -H`, a debugger, a crash log).
    static let threadName = "tether.read"

    private func run() {
        #if canImport(Darwin)
            pthread_setname_np(Self.threadName)
        #else
            // `pthread_setname_np` is a GNU extension the Glibc module does not show; the kernel's
            // own way is the thread's `comm` file.
            let file = open("/proc/thread-self/comm", O_WRONLY)
            if file >= 0 {
                _ = Array(Self.threadName.utf8).withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
                _ = systemClose(file)
            }
        #endif
        var watching = true
        var fds = [
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let count = poll(&fds, watching ? 2 : 1, -1)
            if count < 0 {
                // Only EINTR and ENOMEM can happen here: wait a moment and watch again, never
                // leave the connection unwatched.
                if errno != EINTR { usleep(1000) }
                continue
            }
            if fds[0].revents != 0 { break }
            if watching, fds[1].revents != 0 {
                let handler = handler
                watching = queue.sync { ConnectionExecutor.runningInline(on: queue, handler) }
            }
        }
        let onStopped = state.withLock { state -> (@Sendable () -> Void)? in
            guard case .running(let onStopped) = state else { return nil }
            state = .stopped
            return onStopped
        }
        Self.running.subtract(1, ordering: .relaxed)
        if let onStopped { queue.async(execute: onStopped) }
    }
}
