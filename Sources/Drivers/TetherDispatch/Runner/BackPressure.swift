public import TetherCore

/// How a client treats a command when its protocol's queue of unacknowledged messages is full
/// (XEP-0198's stanzas awaiting acknowledgement, SignalR's stateful-reconnect buffer), or the
/// network has not taken `ConnectionOptions.maximumUnsentBytes`: the same choice on both clients.
public enum BackPressure: Sendable, Equatable {
    /// The call waits (cancelably) until there is room, in order with the calls after it. The
    /// default: a plain loop of sends loses nothing.
    case wait
    /// The call throws the protocol's "full" error (kind `sendQueueFull` on both clients) at once:
    /// the app decides.
    case fail
}

/// Commands that found the send queue full, waiting for room in order (`BackPressure.wait`). Used
/// only on the runner's queue.
@_spi(TetherInternal) public struct BlockedCommands<Machine: ~Copyable, Failure: Error> {
    public struct Command {
        /// Runs it; throws the protocol's "full" error when there is still no room.
        @usableFromInline package var run: (inout Machine, Instant) throws(Failure) -> Void
        @usableFromInline package var fail: (Failure) -> Void
        /// Identifies the command for canceling it (its awaiting call).
        @usableFromInline package var call: AnyObject?

        @inlinable package init(
            run: @escaping (inout Machine, Instant) throws(Failure) -> Void,
            fail: @escaping (Failure) -> Void,
            call: AnyObject? = nil
        ) {
            self.run = run
            self.fail = fail
            self.call = call
        }
    }

    @usableFromInline var commands: [Command] = [] {
        didSet { count = commands.count }
    }

    @inlinable package init() {}

    /// Read on every drive: a stored count, since the unspecialized generic code asking the
    /// array would look up its element type's metadata each time.
    @inlinable package var isEmpty: Bool { count == 0 }

    /// How many commands wait.
    @usableFromInline package private(set) var count = 0

    @inlinable package mutating func append(_ command: Command) {
        commands.append(command)
    }

    /// Runs the waiting commands in order until one finds no room (`isFull`) again.
    @inlinable package mutating func retry(on machine: inout Machine, now: Instant, isFull: (Failure) -> Bool) {
        while let command = commands.first {
            do throws(Failure) {
                try command.run(&machine, now)
            } catch {
                if isFull(error) { return }
                command.fail(error)
            }
            commands.removeFirst()
        }
    }

    /// Fails the waiting command of `call` (its task was canceled); false if none waits.
    @inlinable package mutating func cancel(_ call: AnyObject, with error: Failure) -> Bool {
        guard let index = commands.firstIndex(where: { $0.call === call }) else { return false }
        commands.remove(at: index).fail(error)
        return true
    }

    /// Fails every waiting command (the connection closed).
    @inlinable package mutating func failAll(_ error: Failure) {
        let failing = commands
        commands.removeAll()
        for command in failing { command.fail(error) }
    }
}
