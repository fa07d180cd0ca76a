#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: the same `withLock` shape as `Synchronization.Mutex`, but made of the
/// primitive Thread Sanitizer understands. Swift's `Mutex` on Linux takes a futex directly, which TSan cannot
/// see, so every access under it was reported as a race (`make sanitize` could not pass); the relay's shared
/// state uses this type instead. Safe from any thread.
public final class Locked<Value>: @unchecked Sendable {
    // Invariant: `value` is read and written only between lock and unlock of `mutex`. Both are visible to other
    // modules' inlined code only (`@usableFromInline`), so that `withLock` and the counters built on it
    // (`Locked+Atomic.swift`) are specialised where they are called, not run as generic code through witness
    // tables (728 instructions per counter update instead of 75, callgrind).
    @usableFromInline var value: Value
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable @inline(__always)
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
