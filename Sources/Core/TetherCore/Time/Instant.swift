/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
///
/// Tether's machines never read a clock: the caller passes the current `Instant` into every call
/// that depends on time, which makes the machines deterministic and testable on a virtual clock.
/// Drivers usually derive it from `ContinuousClock` or `DispatchTime.uptimeNanoseconds`.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin.
    public var nanoseconds: Int64

    /// Creates an instant `nanoseconds` after the clock's origin.
    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// The instant `offset` after the clock's origin (saturating): `Instant(.seconds(90))`.
    public init(_ offset: Duration) {
        self.init(nanoseconds: offset.totalNanoseconds)
    }

    /// The instant `seconds` after the clock's origin (saturating; fractions to the nanosecond).
    public init(seconds: Double) {
        // Beyond about ±292 years an Int64 of nanoseconds saturates.
        if seconds >= 9.2e9 {
            self.init(nanoseconds: .max)
        } else if seconds <= -9.2e9 {
            self.init(nanoseconds: .min)
        } else {
            self.init(.seconds(seconds))
        }
    }

    /// The clock's origin, convenient as the start of a virtual clock in tests.
    public static let zero = Instant(nanoseconds: 0)

    /// The time since the clock's origin.
    public var sinceOrigin: Duration { .nanoseconds(nanoseconds) }

    public static func < (lhs: Instant, rhs: Instant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant `duration` after `instant` (saturating at the representable range).
    public static func + (instant: Instant, duration: Duration) -> Instant {
        Instant(nanoseconds: instant.nanoseconds.addingSaturating(duration.totalNanoseconds))
    }

    /// The instant `duration` before `instant` (saturating at the representable range).
    public static func - (instant: Instant, duration: Duration) -> Instant {
        Instant(nanoseconds: instant.nanoseconds.addingSaturating(-duration.totalNanoseconds))
    }

    /// The time elapsed from `rhs` to `lhs` (negative when `lhs` is earlier).
    public static func - (lhs: Instant, rhs: Instant) -> Duration {
        .nanoseconds(lhs.nanoseconds.addingSaturating(-rhs.nanoseconds))
    }

    public var description: String {
        "Instant(\(nanoseconds) ns)"
    }
}

extension Duration {
    /// The duration in whole nanoseconds, saturated to the range of `Int64`.
    @_spi(TetherInternal) public var totalNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (fromSeconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return fromSeconds.addingSaturating(attoseconds / 1_000_000_000)
    }
}

extension Int64 {
    @inline(__always)
    fileprivate func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other < 0 ? .min : .max }
        return sum
    }
}
