// Timers that leave the loop when cancelled: DeadlineQueue removal, LoopTimer.cancel, LazyTimer.
import Support
import Testing
import TestSupportCore
import Transport

private func ns(_ n: UInt64) -> Support.Instant { Support.Instant(nanoseconds: n) }

/// Early removal: an entry leaves the heap at once, wherever it sits, and the rest still pops in order.
@Suite struct DeadlineQueueRemovalTests {
    final class Entry {
        let name: Int
        var index = -1
        init(_ name: Int) { self.name = name }
    }

    @Test(arguments: [UInt64(3), 99, 0xC0FFEE])
    func removingAnyEntryKeepsTheOrderOfTheRest(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var q = DeadlineQueue<Entry>(moved: { entry, index in entry.index = index })
        var live: [(deadline: UInt64, entry: Entry)] = []
        for name in 0..<500 {
            let deadline = UInt64.random(in: 0..<50, using: &random)
            let entry = Entry(name)
            q.push(entry, at: ns(deadline))
            live.append((deadline, entry))
            if Int.random(in: 0..<3, using: &random) == 0, let victim = live.indices.randomElement(using: &random) {
                let removed = q.remove(at: live[victim].entry.index)
                #expect(removed === live[victim].entry)
                #expect(removed.index == -1)
                live.remove(at: victim)
            }
        }
        #expect(q.count == live.count)
        let expected = live.enumerated().sorted { a, b in
            a.element.deadline != b.element.deadline ? a.element.deadline < b.element.deadline : a.element.entry.name < b.element.entry.name
        }.map(\.element.entry.name)
        #expect(q.popDue(at: ns(UInt64.max)).map(\.name) == expected)
        #expect(q.count == 0)
    }
}

/// A cancelled loop timer is gone from the loop at once: 100 000 armed and cancelled timers (a busy relay's
/// requests, each with a 300 s idle timeout) leave nothing behind.
@Suite struct LoopTimerTests {
    @Test func cancelledTimersLeaveTheLoopAtOnce() {
        let clock = ManualClock()
        let loop = EventLoop(index: 0, clock: clock)
        let fired = loop.queue.sync { () -> Int in
            var fired = 0
            var keep: [LoopTimer] = []
            for i in 0..<100_000 {
                let timer = loop.schedule(afterSeconds: 300) { fired += 1 }
                if i % 1000 == 0 { keep.append(timer) } else { timer.cancel() }
            }
            #expect(loop.armedTimerCount == 100)
            for timer in keep { timer.cancel() }
            #expect(loop.armedTimerCount == 0)
            var lazy = LazyTimer()
            for second in 1...1000 {
                lazy.arm(at: clock.now().advanced(bySeconds: Double(second)), on: loop) { fired += 1 }
            }
            #expect(loop.armedTimerCount == 1, "a later deadline re-arms nothing")
            let armed = clock.now().advanced(bySeconds: 1)
            #expect(lazy.covers(armed) && lazy.covers(armed.advanced(bySeconds: 5)))
            #expect(!lazy.covers(clock.now().advanced(bySeconds: 0.5)), "an earlier deadline needs a new timer")
            lazy.cancel()
            #expect(!lazy.covers(armed), "nothing armed covers nothing")
            #expect(loop.armedTimerCount == 0)
            clock.advance(bySeconds: 2_000)
            loop.runDueTimers()
            return fired
        }
        #expect(fired == 0)
    }
}

#if canImport(Glibc)
import Dispatch
import Glibc

/// The loop's timers run on its poller's thread (Linux): the wait in `epoll_wait` ends at the earliest deadline.
/// A timer armed off the poller's turns (a block on the loop's queue, as another loop or a Redis reply hands work
/// over) must wake a thread blocked with no deadline, or for a later one. Real clock; each wait below is an upper
/// bound for a timer due in 20 ms, not a pause.
@Suite struct PollerDeadlineTests {
    @Test func timeoutRoundsUpToTheMillisecond() {
        let now: UInt64 = 5_000_000_000
        #expect(Poller.timeoutMs(until: 0, now: now) == -1, "no deadline: wait for events only")
        #expect(Poller.timeoutMs(until: now - 1, now: now) == 0)
        #expect(Poller.timeoutMs(until: now, now: now) == 0)
        #expect(Poller.timeoutMs(until: now + 1, now: now) == 1, "never wakes before the deadline")
        #expect(Poller.timeoutMs(until: now + 1_000_000, now: now) == 1)
        #expect(Poller.timeoutMs(until: now + 1_000_001, now: now) == 2)
        #expect(Poller.timeoutMs(until: UInt64.max - 1, now: now) == Int32.max)
    }

    /// Arms a timer due in 20 ms from a block on the loop's queue (outside the poller's turns), once the poller's
    /// thread is blocked: with no deadline, or (`after`) for a timer armed first. Whether it ran, and whether it
    /// ran before its deadline.
    private func fire(after first: Double?) -> (fired: Bool, early: Bool) {
        let loop = EventLoop(index: 0)
        if let first { loop.queue.sync { _ = loop.schedule(afterSeconds: first) {} } }
        // The thread blocks in its wait once the block above has run; a wait for a few milliseconds at most.
        var spins = 0
        while spins < 100_000 {
            let blocked = loop.poller.blockedUntil
            if first == nil ? blocked == UInt64.max : (blocked != 0 && blocked != UInt64.max) { break }
            usleep(50)
            spins += 1
        }
        let done = DispatchSemaphore(value: 0)
        let result = Locked((fired: false, early: false))
        loop.queue.async {
            let deadline = loop.clock.now().advanced(byNanoseconds: 20_000_000)
            _ = loop.schedule(at: deadline) {
                let early = loop.clock.now() < deadline
                result.withLock { $0 = (true, early) }
                done.signal()
            }
        }
        _ = done.wait(timeout: .now() + 5)
        return result.withLock { $0 }
    }

    @Test func aTimerArmedOutsideATurnWakesAnIdlePoller() {
        let outcome = fire(after: nil)
        #expect(outcome.fired, "the poller waited on with no deadline")
        #expect(!outcome.early)
    }

    /// curl's timeouts are on real time (`schedule(afterRealNanoseconds:)`): a loop whose clock a test moves by
    /// hand still runs them when they are due, and runs its own timers only when its clock says so.
    @Test func realTimeTimersRunOnAManualClockLoop() {
        let clock = ManualClock()
        let loop = EventLoop(index: 0, clock: clock)
        let done = DispatchSemaphore(value: 0)
        let fired = Locked((real: false, manual: false))
        loop.queue.sync {
            _ = loop.schedule(at: clock.now().advanced(bySeconds: 0.01)) { fired.withLock { $0.manual = true } }
            _ = loop.schedule(afterRealNanoseconds: 20_000_000) {
                fired.withLock { $0.real = true }
                done.signal()
            }
        }
        _ = done.wait(timeout: .now() + 5)
        let seen = loop.queue.sync { fired.withLock { $0 } }
        #expect(seen.real, "the real-time timer ran without the manual clock moving")
        #expect(!seen.manual, "the manual clock's timer waits for the clock")
        loop.queue.sync {
            #expect(loop.armedTimerCount == 1)
            clock.advance(bySeconds: 1)
            loop.runDueTimers()
        }
        #expect(fired.withLock { $0.manual })
    }

    @Test func anEarlierTimerShortensAWaitForALaterOne() {
        let outcome = fire(after: 60)
        #expect(outcome.fired, "the poller waited on for the 60 s timer")
        #expect(!outcome.early)
    }
}
#endif
