package import Dispatch
package import TetherCore

/// A runner's one timer (`Specs/machine-contract.md`, "The runner"): a Dispatch timer source on
/// the runner's queue, armed at the machine's earliest deadline (`pollTimeout()`), re-scheduled
/// only when that changes. Used only on the runner's queue.
package final class DeadlineTimer {
    private let source: any DispatchSourceTimer
    private var armed: Instant?
    /// Called at each deadline.
    package var onFire: (() -> Void)?

    /// A timer on `queue` (not armed).
    package init(queue: DispatchQueue) {
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
    package static func now() -> Instant {
        Instant(nanoseconds: Int64(DispatchTime.now().uptimeNanoseconds))
    }

    /// Fires at `deadline` (never when nil).
    package func arm(at deadline: Instant?) {
        guard deadline != armed else { return }
        armed = deadline
        if let deadline {
            source.schedule(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(0, deadline.nanoseconds))))
        } else {
            source.schedule(deadline: .distantFuture)
        }
    }

    /// Stops for good.
    package func cancel() {
        source.cancel()
    }
}
