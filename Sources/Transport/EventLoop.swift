import Dispatch
import Support

/// One serial Dispatch queue and everything it owns: the client connections assigned to it, the upstream
/// driver bound to it, its timers and a shared read buffer. Every object handed out by a loop is used on
/// `queue` only, which is what makes the `@unchecked Sendable` on those classes true.
///
/// A handful of loops (one per core) is the nginx worker model: no locks between a client socket and its
/// upstream transfer, because both live on the same queue.
public final class EventLoop: @unchecked Sendable {
    // Invariant: every stored mutable property below is read and written on `queue` only.
    public let queue: DispatchQueue
    public let clock: any Clock
    public let index: Int
    /// Armed timers only: a cancelled one leaves at once (`LoopTimer.cancel`).
    private var deadlines = DeadlineQueue<LoopTimer>(moved: { timer, index in timer.index = index })
    /// Armed timers on CLOCK_MONOTONIC whatever `clock` is (`schedule(afterRealNanoseconds:)`): curl's timeouts,
    /// which curl measures in real time, also in tests that move `clock` by hand.
    private var realDeadlines = DeadlineQueue<LoopTimer>(moved: { timer, index in timer.index = index })
    #if !canImport(Glibc)
    private let timerSource: DispatchSourceTimer
    #endif
    /// When the poller (Linux) or the Dispatch timer (Darwin) is set to wake the loop, in CLOCK_MONOTONIC
    /// nanoseconds; nil for none.
    private var armedDeadline: UInt64?
    /// Scratch space for `recv`: one per loop, safe because the loop is serial and no caller keeps it.
    public let readBuffer: UnsafeMutableRawBufferPointer
    /// The loop's sockets (client connections and curl's) are watched here.
    public let poller: Poller

    public init(index: Int, clock: any Clock = MonotonicClock()) {
        self.index = index
        self.clock = clock
        self.queue = DispatchQueue(label: "sse-relay.loop.\(index)")
        self.readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        self.poller = Poller(queue: queue, clock: clock)
        #if canImport(Glibc)
        // The timers run on the poller's thread, in a turn, when its wait ends at their deadline: a Dispatch timer
        // woke libdispatch's manager thread for every earlier deadline and ran its handler on a worker thread, and
        // curl asks for timeouts of a millisecond several times per stream (2 706 firings in a run of 2 000 streams).
        // Weak: the poller outlives the loop by the time its thread takes to stop.
        poller.onDeadline = { [weak self] in self?.fireDueTimers() }
        #else
        self.timerSource = DispatchSource.makeTimerSource(queue: queue)
        // Weak, not unowned: cancelling the source in `deinit` does not stop a firing already on its way to the
        // queue, and under ThreadSanitizer one ran after the loop was freed ("read an unowned reference but the
        // object was already destroyed", make sanitize).
        timerSource.setEventHandler { [weak self] in self?.fireDueTimers() }
        timerSource.schedule(deadline: .distantFuture)
        timerSource.activate()
        #endif
    }

    deinit {
        // Nothing else holds the loop now: stop its poller, which closes the poll descriptor (on Linux its waiting
        // thread does, once woken through its pipe; on Darwin the kqueue read source's cancel handler).
        poller.stop()
        #if !canImport(Glibc)
        timerSource.cancel()
        #endif
        readBuffer.deallocate()
    }

    /// Debug builds stop at once when called off this loop's queue: what turns the `@unchecked Sendable` of the
    /// loop-confined types (`Connection`, `ServerConnection`, `Transfer`, `RelayExchange`) from a promise into a
    /// check. Release builds do nothing.
    @inlinable @inline(__always)
    public func assertOnLoop() {
        #if DEBUG
        dispatchPrecondition(condition: .onQueue(queue))
        #endif
    }

    public func execute(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Runs `work` on this loop in the same turn, once the slice of poller handlers running now has run (no
    /// hop through the queue): see `Poller.soon`. Call on the loop.
    public func soon(_ work: @escaping () -> Void) {
        assertOnLoop()
        poller.soon(work)
    }

    /// Runs `action` on this loop at `deadline` unless the returned timer is cancelled first. Call on the loop.
    @discardableResult
    public func schedule(at deadline: Instant, _ action: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(action: action, loop: self)
        deadlines.push(timer, at: deadline)
        rearm()
        return timer
    }

    /// Runs `action` on this loop `nanoseconds` of real time from now (CLOCK_MONOTONIC, not `clock`) unless the
    /// returned timer is cancelled first. Call on the loop.
    @discardableResult
    public func schedule(afterRealNanoseconds nanoseconds: UInt64, _ action: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(action: action, loop: self)
        timer.real = true
        realDeadlines.push(timer, at: MonotonicClock().now().advanced(byNanoseconds: nanoseconds))
        rearm()
        return timer
    }

    /// The timers armed on this loop (cancelled ones are gone), on either clock. Call on the loop.
    public var armedTimerCount: Int { deadlines.count + realDeadlines.count }

    /// A cancelled timer's entry leaves the queue at once. The wake-up armed for it stays: when it comes, nothing
    /// is due and it is armed again for the next deadline.
    fileprivate func removeTimer(at index: Int, real: Bool) {
        if real { realDeadlines.remove(at: index) } else { deadlines.remove(at: index) }
    }

    /// Runs the timers due at `clock.now()` at once (and the real-time ones due). Call on the loop; for tests on a
    /// manual clock, whose deadlines the loop's wake-ups would only reach in real time.
    public func runDueTimers() { fireDueTimers() }

    private func fireDueTimers() {
        armedDeadline = nil
        for timer in deadlines.popDue(at: clock.now()) {
            timer.fire()
        }
        for timer in realDeadlines.popDue(at: MonotonicClock().now()) {
            timer.fire()
        }
        rearm()
    }

    private func rearm() {
        let realNow = MonotonicClock().now().nanoseconds
        var delay: UInt64?
        if let next = deadlines.nextDeadline {
            let now = clock.now()
            delay = next > now ? next.nanoseconds - now.nanoseconds : 0
        }
        if let next = realDeadlines.nextDeadline?.nanoseconds {
            let wait = next > realNow ? next - realNow : 0
            delay = min(delay ?? wait, wait)
        }
        guard let delay else { return }
        let at = realNow.addingReportingOverflow(delay).overflow ? UInt64.max : realNow + delay
        if let armed = armedDeadline, armed <= at { return }
        armedDeadline = at
        #if canImport(Glibc)
        poller.setDeadline(afterNanoseconds: delay)
        #else
        timerSource.schedule(deadline: .now() + .nanoseconds(Int(min(delay, UInt64(Int.max)))))
        #endif
    }
}

/// A one-shot timer on an event loop. Cancel it on the loop; a cancelled timer never runs, and its entry (and the
/// closure it held) is freed at once.
public final class LoopTimer: @unchecked Sendable {
    // Invariant: only touched on the owning loop's queue.
    private var action: (() -> Void)?
    /// Where the loop's queue keeps it; -1 once fired, cancelled or removed.
    fileprivate var index = -1
    /// In the loop's real-time queue (`schedule(afterRealNanoseconds:)`).
    fileprivate var real = false
    private weak var loop: EventLoop?
    init(action: @escaping () -> Void, loop: EventLoop?) {
        self.action = action
        self.loop = loop
    }
    public var isCancelled: Bool { action == nil }
    public func cancel() {
        action = nil
        if index >= 0 { loop?.removeTimer(at: index, real: real) }
    }
    func fire() {
        let run = action
        action = nil
        run?()
    }
}

/// A fixed set of event loops; connections are spread round-robin.
public final class EventLoopGroup: Sendable {
    public let loops: [EventLoop]

    public init(count: Int, clock: any Clock = MonotonicClock()) {
        loops = (0..<max(1, count)).map { EventLoop(index: $0, clock: clock) }
    }
}

