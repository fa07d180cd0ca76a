import Support

/// One deadline kept armed lazily on a loop, for an owner whose deadline moves with activity (a connection's idle
/// timeout, an exchange's first-byte and idle timeouts). Arming a later deadline while an earlier one is armed
/// changes nothing, so activity costs no timer work on the hot path: when the earlier timer fires, the owner asks
/// its state machine what is really due and arms again for the real deadline. Cancelling frees the loop's entry at
/// once (`LoopTimer.cancel`).
///
/// A value inside one loop-confined owner: used on that loop's queue only, like its owner.
public struct LazyTimer {
    private var timer: LoopTimer?
    private var armedAt: Instant?

    public init() {}

    /// The deadline the armed timer fires at; nil when none is armed.
    public var armedDeadline: Instant? { timer == nil ? nil : armedAt }

    /// True when an armed timer fires no later than `deadline`: `arm(at: deadline)` would change nothing. Lets an
    /// owner skip building the firing closure on its hot path.
    public func covers(_ deadline: Instant) -> Bool {
        guard let armed = armedAt, armed <= deadline else { return false }
        return timer?.isCancelled == false
    }

    /// Arms for `deadline` unless an armed timer fires no later. `fire` runs on the loop when the timer fires; it
    /// must call `fired()` first.
    /// `loop` is read only when a timer is armed: the common case, an earlier deadline already armed, costs a
    /// comparison.
    public mutating func arm(at deadline: Instant, on loop: @autoclosure () -> any LoopScheduler, _ fire: @escaping () -> Void) {
        if covers(deadline) { return }
        timer?.cancel()
        armedAt = deadline
        timer = loop().schedule(at: deadline, fire)
    }

    /// The timer fired: nothing is armed now.
    public mutating func fired() {
        timer = nil
        armedAt = nil
    }

    /// Disarms: the loop forgets the timer at once.
    public mutating func cancel() {
        timer?.cancel()
        timer = nil
        armedAt = nil
    }
}
