// Test support shared by every test target: no sockets, no relay modules.
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A monotonic deadline (DispatchTime uptime nanoseconds): the safety bound of every wait in the tests.
package struct HarnessDeadline: Sendable {
    package let uptimeNanoseconds: UInt64

    /// `seconds` from now; zero or less (or NaN) is already expired.
    package init(seconds: Double) {
        let now = DispatchTime.now().uptimeNanoseconds
        let delta: UInt64
        if !(seconds > 0) {
            delta = 0
        } else if seconds >= 1_000_000 {
            delta = 1_000_000 * 1_000_000_000
        } else {
            delta = UInt64(seconds * 1e9)
        }
        uptimeNanoseconds = now + delta
    }

    package var remainingNanoseconds: UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        return uptimeNanoseconds > now ? uptimeNanoseconds - now : 0
    }

    package var isExpired: Bool { remainingNanoseconds == 0 }

    package var remainingSeconds: Double { Double(remainingNanoseconds) / 1e9 }

    /// A poll() timeout: rounded up to whole milliseconds (so a nearly expired deadline never spins).
    package var pollMilliseconds: Int32 {
        let ns = remainingNanoseconds
        if ns == 0 { return 0 }
        return Int32(min((ns + 999_999) / 1_000_000, UInt64(Int32.max)))
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock child processes such as the TLS upstream stamp their events with,
/// so a test can order them against its own actions.
package func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
