// Test harness: synchronisation between a test and upstream scripts (no sleeps: every wait has a deadline).
// Must not import the relay's modules.
import Dispatch
import Foundation

/// A monotonic deadline (DispatchTime uptime nanoseconds).
struct HarnessDeadline: Sendable {
    let uptimeNanoseconds: UInt64

    init(seconds: Double) {
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

    var remainingNanoseconds: UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        return uptimeNanoseconds > now ? uptimeNanoseconds - now : 0
    }

    var isExpired: Bool { remainingNanoseconds == 0 }

    var remainingSeconds: Double { Double(remainingNanoseconds) / 1e9 }

    /// A poll() timeout: rounded up to whole milliseconds (so a nearly expired deadline never spins).
    var pollMilliseconds: Int32 {
        let ns = remainingNanoseconds
        if ns == 0 { return 0 }
        return Int32(min((ns + 999_999) / 1_000_000, UInt64(Int32.max)))
    }
}

/// A value guarded by a condition variable, for "wait until the state says so" with a deadline.
///
/// Invariant that justifies `@unchecked Sendable`: `value` is read or written only while `condition` is locked
/// (every access goes through `withLock` or `wait`), and `Value` is itself `Sendable`.
final class HarnessMonitor<Value: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: Value

    init(_ value: Value) { self.value = value }

    /// Runs `body` under the lock, then wakes every waiter so it re-checks its predicate.
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try body(&value)
    }

    /// Blocks until `ready` returns non-nil (it may mutate the state, e.g. consume an item), or throws
    /// `HarnessError.timeout` once `timeout` seconds have passed.
    @discardableResult
    func wait<R>(timeout: Double, until ready: (inout Value) -> R?) throws -> R {
        let deadline = HarnessDeadline(seconds: timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let result = ready(&value) { return result }
            if deadline.isExpired { throw HarnessError.timeout }
            _ = condition.wait(until: Date(timeIntervalSinceNow: deadline.remainingSeconds))
        }
    }
}

/// A counting signal between a test and a script: each `signal()` lets exactly one `wait` through
/// (a signal given before the wait is kept). Typical lock-step use: the script writes event k, then
/// `try gate.wait()`; the test reads event k, then `gate.signal()`.
final class Gate: Sendable {
    private let permits = HarnessMonitor(0)

    init() {}

    func signal(_ count: Int = 1) {
        permits.withLock { $0 += count }
    }

    /// Consumes one signal, waiting for it if needed; throws `TestClientError.timeout` after `timeout` seconds.
    func wait(timeout: Double = 5) throws {
        try permits.wait(timeout: timeout) { permits -> Bool? in
            guard permits > 0 else { return nil }
            permits -= 1
            return true
        }
    }

    /// Signals given and not yet consumed by a wait.
    var pendingSignals: Int { permits.withLock { $0 } }
}

/// A queue for handing values from a script thread to the test (or back): `put` never blocks,
/// `take` waits for the oldest value or throws `TestClientError.timeout`.
final class Mailbox<Value: Sendable>: Sendable {
    private let items = HarnessMonitor<[Value]>([])

    init() {}

    func put(_ value: Value) {
        items.withLock { $0.append(value) }
    }

    func take(timeout: Double = 5) throws -> Value {
        try items.wait(timeout: timeout) { items -> Value? in
            items.isEmpty ? nil : items.removeFirst()
        }
    }

    /// Values put and not yet taken.
    var count: Int { items.withLock { $0.count } }
}
