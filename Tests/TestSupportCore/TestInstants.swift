// Fixed instants for tests of timers and deadlines, shared by the pure-core test targets.
import Support

/// The instant every test starts at (an arbitrary, non-zero origin).
package let t0 = Support.Instant(nanoseconds: 1_000_000_000)

/// `t0` plus whole seconds, exact.
package func at(_ seconds: UInt64, plusNanoseconds ns: UInt64 = 0) -> Support.Instant {
    Support.Instant(nanoseconds: t0.nanoseconds + seconds * 1_000_000_000 + ns)
}

/// `t0` plus whole seconds, minus one nanosecond: the last instant before a deadline.
package func justBefore(_ seconds: UInt64) -> Support.Instant {
    Support.Instant(nanoseconds: t0.nanoseconds + seconds * 1_000_000_000 - 1)
}
