// Test harness: synchronisation between a test and upstream scripts (no sleeps: every wait has a deadline).
// Must not import the relay's modules.
import Foundation
import TestSupportCore

/// A value guarded by a condition variable, for "wait until the state says so" with a deadline.
///
/// Invariant that justifies `@unchecked Sendable`: `value` is read or written only while `condition` is locked
/// (every access goes through `withLock` or `wait`), and `Value` is itself `Sendable`.
package final class HarnessMonitor<Value: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` under the lock, then wakes every waiter so it re-checks its predicate.
    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
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
    package func wait<R>(timeout: Double, until ready: (inout Value) -> R?) throws -> R {
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
package final class Gate: Sendable {
    private let permits = HarnessMonitor(0)

    package init() {}

    package func signal(_ count: Int = 1) {
        permits.withLock { $0 += count }
    }

    /// Consumes one signal, waiting for it if needed; throws `HarnessError.timeout` after `timeout` seconds.
    package func wait(timeout: Double = 5) throws {
        try permits.wait(timeout: timeout) { permits -> Bool? in
            guard permits > 0 else { return nil }
            permits -= 1
            return true
        }
    }

    /// Consumes `count` signals, each waited for at most `timeout` seconds.
    package func wait(timeout: Double, count: Int) throws {
        for _ in 0..<count { try wait(timeout: timeout) }
    }

    /// Signals given and not yet consumed by a wait.
    package var pendingSignals: Int { permits.withLock { $0 } }
}

/// A queue for handing values from a script thread to the test (or back): `put` never blocks,
/// `take` waits for the oldest value or throws `HarnessError.timeout`.
package final class Mailbox<Value: Sendable>: Sendable {
    private let items = HarnessMonitor<[Value]>([])

    package init() {}

    package func put(_ value: Value) {
        items.withLock { $0.append(value) }
    }

    package func take(timeout: Double = 5) throws -> Value {
        try items.wait(timeout: timeout) { items -> Value? in
            items.isEmpty ? nil : items.removeFirst()
        }
    }

    /// Values put and not yet taken.
    package var count: Int { items.withLock { $0.count } }

    /// Takes every value put so far, oldest first, without waiting.
    package func drain() -> [Value] {
        items.withLock { items in
            defer { items.removeAll() }
            return items
        }
    }
}
