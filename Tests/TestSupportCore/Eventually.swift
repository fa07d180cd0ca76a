// Test support shared by every test target: no sockets, no relay modules.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `eventually` throws when its condition did not hold in time.
package struct EventuallyTimeout: Error, CustomStringConvertible {
    /// The caller's description, evaluated at the timeout (so it can show the state that was still wrong).
    package let what: String
    package let seconds: Double

    package var description: String { "not \(what) within \(seconds) s" }
}

/// Interval between two checks: short against the tests' timeouts (hundreds of ms and up), long enough not to
/// compete with the code under test for the CPU.
private let pollIntervalMicroseconds: UInt32 = 1_000

/// Waits until `condition` holds, checking it every millisecond, for state that has no signal to wait on (the
/// relay's live counts, a log line written by another queue, a library's stream count). Where a signal exists,
/// wait on it instead (`Gate`, `Mailbox`, `HarnessMonitor`). `timeout` is a safety bound, never a pause: the
/// call returns as soon as the condition holds.
///
/// - Parameter what: the awaited state, for the error; evaluated only at the timeout.
/// - Throws: `EventuallyTimeout` once `timeout` seconds passed with the condition still false.
package func eventually(
    _ what: @autoclosure () -> String = "true", timeout: Double = 2, _ condition: () throws -> Bool
) throws {
    let deadline = HarnessDeadline(seconds: timeout)
    while try !condition() {
        if deadline.isExpired { throw EventuallyTimeout(what: what(), seconds: timeout) }
        usleep(pollIntervalMicroseconds)
    }
}

/// `eventually` for async tests (the overload an async context picks): suspends between checks instead of
/// blocking a thread of the shared concurrency pool.
package func eventually(
    _ what: @autoclosure () -> String = "true", timeout: Double = 2, _ condition: () throws -> Bool
) async throws {
    let deadline = HarnessDeadline(seconds: timeout)
    while try !condition() {
        if deadline.isExpired { throw EventuallyTimeout(what: what(), seconds: timeout) }
        try await Task.sleep(nanoseconds: UInt64(pollIntervalMicroseconds) * 1_000)
    }
}
