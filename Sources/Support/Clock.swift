#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point on the monotonic clock, in nanoseconds since an arbitrary origin.
/// Timeouts are computed from these, never from wall-clock time, so a clock step cannot fire or stall them.
package struct Instant: Comparable, Hashable, Sendable {
    package var nanoseconds: UInt64
    package init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }
    package static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }
    package func advanced(bySeconds seconds: Double) -> Instant {
        Instant(nanoseconds: nanoseconds &+ UInt64(max(0, seconds) * 1e9))
    }
    package func advanced(byNanoseconds ns: UInt64) -> Instant { Instant(nanoseconds: nanoseconds &+ ns) }
    /// Seconds from `earlier` to `self` (0 when `earlier` is later).
    package func seconds(since earlier: Instant) -> Double {
        self >= earlier ? Double(nanoseconds - earlier.nanoseconds) / 1e9 : 0
    }
}

/// Where time comes from. Production uses `MonotonicClock`; tests use `ManualClock` and move it by hand.
package protocol Clock: Sendable {
    func now() -> Instant
}

/// CLOCK_MONOTONIC.
package struct MonotonicClock: Clock {
    package init() {}
    package func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }
}

/// A clock that only moves when a test says so.
package final class ManualClock: Clock {
    private let current: Locked<Instant>
    package init(start: Instant = Instant(nanoseconds: 1_000_000_000)) { current = Locked(start) }
    package func now() -> Instant { current.withLock { $0 } }
    package func advance(bySeconds seconds: Double) {
        current.withLock { $0 = $0.advanced(bySeconds: seconds) }
    }
}
