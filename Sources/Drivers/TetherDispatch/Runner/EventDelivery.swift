public import Dispatch

/// How a client's events reach the app, the same for every client: one handler on a queue the app
/// chooses (`setHandler`), any number of observers (the clients' `onConnected`-style callbacks),
/// and any number of `AsyncStream`s. Used only on the runner's queue.
///
/// The guarantee both clients give: an event reaches every handler, observer and stream before an
/// awaiting call that it ends (`connect()`, `start()`, `disconnect()`, `stop()`) returns:
/// `deliver(_:then:)` runs `then` on the runner's queue once every handler and observer has run.
@_spi(TetherInternal) public final class EventDelivery<Event: Sendable>: @unchecked Sendable {
    @usableFromInline let runnerQueue: DispatchQueue
    @exclusivity(unchecked) @usableFromInline var handler: (queue: DispatchQueue, body: @Sendable (Event) -> Void)?
    @usableFromInline var observers: [(queue: DispatchQueue, body: @Sendable (Event) -> Void)] = []
    @usableFromInline var streams: [Int: AsyncStream<Event>.Continuation] = [:]
    @usableFromInline var nextStream = 0
    /// Events for the handler and observers not yet sent to their queues: a drain's events go in
    /// one block per queue (`flush()`), not one each, which saves a thread wake-up per message.
    @exclusivity(unchecked) @usableFromInline var pending: [Event] = []

    @inlinable package init(runnerQueue: DispatchQueue) {
        self.runnerQueue = runnerQueue
    }

    /// Calls `body` on `queue` with every event from now on, replacing an earlier handler.
    @inlinable package func setHandler(queue: DispatchQueue, _ body: @escaping @Sendable (Event) -> Void) {
        handler = (queue, body)
    }

    /// Also calls `body` on `queue` with every event from now on.
    @inlinable package func addObserver(queue: DispatchQueue, _ body: @escaping @Sendable (Event) -> Void) {
        observers.append((queue, body))
    }

    /// Also yields every event from now on to `continuation`, until its stream ends.
    @inlinable package func addStream(_ continuation: AsyncStream<Event>.Continuation) {
        let key = nextStream
        nextStream += 1
        streams[key] = continuation
        continuation.onTermination = { [weak self, runnerQueue] _ in
            guard let self else { return }
            runnerQueue.async { self.streams[key] = nil }
        }
    }

    /// Delivers `event`; `then` (if any) runs on the runner's queue once every handler and
    /// observer has run. Without `then` the event waits for `flush()` (the end of the drain).
    @inlinable package func deliver(_ event: Event, then: (@Sendable () -> Void)? = nil) {
        for stream in streams.values { stream.yield(event) }
        guard let then else { return pending.append(event) }
        pending.append(event)
        let group = DispatchGroup()
        send(group: group)
        group.notify(queue: runnerQueue, execute: then)
    }

    /// Sends the events delivered since the last flush to the handler and observers, in order.
    @inlinable package func flush() {
        guard !pending.isEmpty else { return }
        send(group: nil)
    }

    @inlinable func send(group: DispatchGroup?) {
        let events = pending
        pending.removeAll()
        if let handler {
            let body = handler.body
            handler.queue.async(group: group) { for event in events { body(event) } }
        }
        for (queue, body) in observers {
            queue.async(group: group) { for event in events { body(event) } }
        }
    }

    /// Ends every stream (the client is gone).
    @inlinable package func finish() {
        for stream in streams.values { stream.finish() }
        streams.removeAll()
    }
}
