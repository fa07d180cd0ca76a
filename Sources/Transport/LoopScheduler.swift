import Support

/// What loop-confined code needs of its loop: the clock, timers, work handed to it, and the check that it runs
/// there. `EventLoop` is the real one (a serial queue and an epoll set); `ManualScheduler` is the fake, so an
/// exchange and its timers are tested without a thread or an epoll set.
public protocol LoopScheduler: AnyObject, Sendable {
    var clock: any Clock { get }
    /// The loop's number in its group: what per-loop state is kept by.
    var index: Int { get }
    /// The real loop behind this scheduler, for what needs sockets on it (a Redis connection); nil for a fake.
    var eventLoop: EventLoop? { get }
    /// Runs `work` on the loop, later (never inside this call).
    func execute(_ work: @escaping @Sendable () -> Void)
    /// Runs `action` on the loop at `deadline` unless the returned timer is cancelled first. Call on the loop.
    @discardableResult
    func schedule(at deadline: Instant, _ action: @escaping () -> Void) -> LoopTimer
    /// Debug builds stop when called off the loop; release builds do nothing.
    func assertOnLoop()
}

extension LoopScheduler {
    @discardableResult
    public func schedule(afterSeconds seconds: Double, _ action: @escaping () -> Void) -> LoopTimer {
        schedule(at: clock.now().advanced(bySeconds: seconds), action)
    }
}

extension EventLoop: LoopScheduler {
    public var eventLoop: EventLoop? { self }
}

/// The scheduler seam's fake: no thread, no epoll set. Work handed to it waits for `runPending()`; timers fire in
/// `runDueTimers()` when the test's clock has reached them, earliest first. Everything runs on the test's thread.
public final class ManualScheduler: LoopScheduler, @unchecked Sendable {
    // Invariant: used from one test thread at a time (the test drives it step by step, as a loop's queue would).
    public let clock: any Clock
    public var eventLoop: EventLoop? { nil }
    public let index = 0
    private var timers: [(deadline: Instant, sequence: Int, timer: LoopTimer)] = []
    private var sequence = 0
    private var pending: [@Sendable () -> Void] = []

    public init(clock: any Clock) { self.clock = clock }

    public func execute(_ work: @escaping @Sendable () -> Void) { pending.append(work) }

    @discardableResult
    public func schedule(at deadline: Instant, _ action: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(action: action, loop: nil)
        timers.append((deadline, sequence, timer))
        sequence += 1
        return timer
    }

    public func assertOnLoop() {}

    /// Runs the work handed over so far, and what that work hands over in turn.
    public func runPending() {
        while !pending.isEmpty { pending.removeFirst()() }
    }

    /// Fires the timers due at the clock's now (and those they arm that are due too), earliest first.
    public func runDueTimers() {
        while true {
            timers.removeAll { $0.timer.isCancelled }
            let now = clock.now()
            guard let next = timers.indices.filter({ timers[$0].deadline <= now })
                .min(by: { (timers[$0].deadline, timers[$0].sequence) < (timers[$1].deadline, timers[$1].sequence) }) else { return }
            let timer = timers.remove(at: next).timer
            timer.fire()
        }
    }

    /// Timers armed and not cancelled.
    public var armedTimerCount: Int { timers.filter { !$0.timer.isCancelled }.count }
}
