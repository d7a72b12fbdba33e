public import Dispatch
public import TetherCore

/// A runner's one timer (`Specs/machine-contract.md`, "The runner"): a Dispatch timer source on
/// the runner's queue, armed at the machine's earliest deadline (`pollTimeout()`). It is
/// re-scheduled only when the deadline comes sooner than the armed one: a deadline that moves
/// later (a keep-alive pushed back by every message) keeps the earlier one armed, which then fires
/// early and harmlessly (the machine's extra `handleTimeout` calls do nothing) and is armed anew.
/// Re-scheduling a Dispatch timer wakes Dispatch's event thread, so this saves a wake-up per
/// message. Used only on the runner's queue.
@usableFromInline package final class DeadlineTimer {
    private let source: any DispatchSourceTimer
    @exclusivity(unchecked) private var armed: Instant?
    /// Called at each deadline.
    @usableFromInline package var onFire: (() -> Void)?

    /// A timer on `queue` (not armed).
    @usableFromInline package init(queue: DispatchQueue) {
        source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: .distantFuture)
        source.setEventHandler { [weak self] in
            guard let self else { return }
            armed = nil
            onFire?()
        }
        source.resume()
    }

    /// The current time on the clock the machines run on (the uptime clock Dispatch timers use).
    @usableFromInline package static func now() -> Instant {
        Instant(nanoseconds: Int64(DispatchTime.now().uptimeNanoseconds))
    }

    /// Fires at `deadline` at the latest (see above; nil: no deadline).
    @usableFromInline package func arm(at deadline: Instant?) {
        guard let deadline else { return }
        if let armed, armed <= deadline { return }
        armed = deadline
        source.schedule(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(0, deadline.nanoseconds))))
    }

    /// Stops for good.
    @usableFromInline package func cancel() {
        source.cancel()
    }
}
