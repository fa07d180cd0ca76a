#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point on the monotonic clock, in nanoseconds since an arbitrary origin.
/// Timeouts are computed from these, never from wall-clock time, so a clock step cannot fire or stall them.
public struct Instant: Comparable, Hashable, Sendable {
    public var nanoseconds: UInt64
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }
    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }
    public func advanced(bySeconds seconds: Double) -> Instant {
        Instant(nanoseconds: nanoseconds &+ UInt64(max(0, seconds) * 1e9))
    }
    public func advanced(byNanoseconds ns: UInt64) -> Instant { Instant(nanoseconds: nanoseconds &+ ns) }
    /// Seconds from `earlier` to `self` (0 when `earlier` is later).
    public func seconds(since earlier: Instant) -> Double {
        self >= earlier ? Double(nanoseconds - earlier.nanoseconds) / 1e9 : 0
    }
}

/// Where time comes from. Production uses `MonotonicClock`; tests use `ManualClock` and move it by hand.
public protocol Clock: Sendable {
    func now() -> Instant
}

/// CLOCK_MONOTONIC.
public struct MonotonicClock: Clock {
    public init() {}
    public func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }
}

/// A clock that only moves when a test says so.
public final class ManualClock: Clock {
    private let current: Locked<Instant>
    public init(start: Instant = Instant(nanoseconds: 1_000_000_000)) { current = Locked(start) }
    public func now() -> Instant { current.withLock { $0 } }
    public func advance(bySeconds seconds: Double) {
        current.withLock { $0 = $0.advanced(bySeconds: seconds) }
    }
}
