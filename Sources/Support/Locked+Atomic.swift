/// `Synchronization.Atomic`'s calls (`load`, `store`, `exchange`, `wrappingAdd`, ...) on a `Locked` value, for
/// the relay's few shared counters and flags.
///
/// Why not `Atomic` itself: it needs macOS 15, and the package's floor is the client library's (macOS 13, iOS 16),
/// since a manifest has one `platforms` list for every target. A pthread mutex needs nothing newer and is seen by
/// Thread Sanitizer. An update costs 76 instructions against `Atomic`'s 7 (callgrind, release build with the
/// server's flags; inlined at the call site, see `Locked`): the relay makes one per relayed event (bytes to the
/// client), about 0.4 % of the 17.6 k instructions an event costs, and a few per request. Each critical section is
/// one integer operation, so the event loops' threads rarely meet on a lock.
///
/// The `ordering` arguments keep the call sites written for `Atomic` unchanged. A lock orders every access
/// fully, so each ordering is as strong as `.sequentiallyConsistent`.
public struct LockedOrdering: Sendable {
    @inlinable public static var relaxed: LockedOrdering { LockedOrdering() }
    @inlinable public static var acquiring: LockedOrdering { LockedOrdering() }
    @inlinable public static var releasing: LockedOrdering { LockedOrdering() }
    @inlinable public static var acquiringAndReleasing: LockedOrdering { LockedOrdering() }
    @inlinable public static var sequentiallyConsistent: LockedOrdering { LockedOrdering() }
    @inlinable init() {}
}

extension Locked {
    @inlinable public func load(ordering: LockedOrdering) -> Value { withLock { $0 } }

    @inlinable public func store(_ desired: Value, ordering: LockedOrdering) { withLock { $0 = desired } }

    /// Stores `desired` and returns the value it replaced.
    @inlinable public func exchange(_ desired: Value, ordering: LockedOrdering) -> Value {
        withLock { value in
            let old = value
            value = desired
            return old
        }
    }
}

extension Locked where Value: FixedWidthInteger {
    /// Adds with wraparound on overflow, like `Atomic.wrappingAdd`.
    @discardableResult
    @inlinable public func wrappingAdd(_ operand: Value, ordering: LockedOrdering) -> (oldValue: Value, newValue: Value) {
        withLock { value in
            let old = value
            value = old &+ operand
            return (old, value)
        }
    }

    @discardableResult
    @inlinable public func wrappingSubtract(_ operand: Value, ordering: LockedOrdering) -> (oldValue: Value, newValue: Value) {
        wrappingAdd(0 &- operand, ordering: ordering)
    }

    /// Adds, trapping on overflow, like `Atomic.add`.
    @discardableResult
    @inlinable public func add(_ operand: Value, ordering: LockedOrdering) -> (oldValue: Value, newValue: Value) {
        withLock { value in
            let old = value
            value = old + operand
            return (old, value)
        }
    }

    @discardableResult
    @inlinable public func subtract(_ operand: Value, ordering: LockedOrdering) -> (oldValue: Value, newValue: Value) {
        withLock { value in
            let old = value
            value = old - operand
            return (old, value)
        }
    }
}
