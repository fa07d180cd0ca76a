// DeadlineQueue: a min-heap popped in deadline order, ties in push order, checked against a sorted reference.
import Support
import Testing
import TestSupportCore
import Transport

private func ns(_ n: UInt64) -> Support.Instant { Support.Instant(nanoseconds: n) }

@Suite struct DeadlineQueueTests {
    @Test func anEmptyQueueHasNothingDue() {
        var q = DeadlineQueue<Int>()
        #expect(q.count == 0)
        #expect(q.nextDeadline == nil)
        #expect(q.popDue(at: ns(UInt64.max)) == [])
    }

    @Test func popsInDeadlineOrder() {
        var q = DeadlineQueue<String>()
        for (name, t) in [("e", 50), ("a", 10), ("c", 30), ("b", 20), ("d", 40)] as [(String, UInt64)] {
            q.push(name, at: ns(t))
        }
        #expect(q.count == 5)
        #expect(q.nextDeadline == ns(10))
        #expect(q.popDue(at: ns(100)) == ["a", "b", "c", "d", "e"])
        #expect(q.count == 0)
        #expect(q.nextDeadline == nil)
    }

    @Test func tiesComeOutInPushOrder() {
        var q = DeadlineQueue<String>()
        q.push("late", at: ns(9))
        for i in 0..<20 { q.push("t\(i)", at: ns(5)) }
        q.push("early", at: ns(1))
        q.push("t20", at: ns(5))
        #expect(q.popDue(at: ns(9)) == ["early"] + (0...20).map { "t\($0)" } + ["late"])
    }

    @Test func popDueReturnsOnlyWhatIsDue() {
        var q = DeadlineQueue<Int>()
        for t: UInt64 in [3, 1, 2, 5, 4] { q.push(Int(t), at: ns(t * 100)) }
        #expect(q.popDue(at: ns(0)) == [])
        #expect(q.popDue(at: ns(99)) == [])
        #expect(q.count == 5)
        #expect(q.popDue(at: ns(200)) == [1, 2])   // a deadline equal to now is due
        #expect(q.count == 3)
        #expect(q.nextDeadline == ns(300))
        #expect(q.popDue(at: ns(200)) == [])
        #expect(q.popDue(at: ns(299)) == [])
        #expect(q.popDue(at: ns(450)) == [3, 4])
        #expect(q.nextDeadline == ns(500))
        q.push(0, at: ns(10))   // a deadline already in the past is due at once
        #expect(q.nextDeadline == ns(10))
        #expect(q.popDue(at: ns(450)) == [0])
        #expect(q.popDue(at: ns(500)) == [5])
        #expect(q.count == 0)
    }

    /// Random pushes (few distinct deadlines, so many ties) and pops at random times, against a stably sorted
    /// array. Replays exactly from its seed.
    @Test(arguments: [UInt64(1), 42, 0xDEAD_BEEF, 7_777_777])
    func matchesASortedReference(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var q = DeadlineQueue<Int>()
        var reference: [(deadline: UInt64, id: Int)] = []   // kept sorted by deadline, ties in push order
        var now: UInt64 = 0
        var nextID = 0
        for step in 0..<3000 {
            if rng.next() % 3 != 0 {
                let deadline = now + rng.next() % 64
                q.push(nextID, at: ns(deadline))
                let index = reference.firstIndex { $0.deadline > deadline } ?? reference.endIndex
                reference.insert((deadline, nextID), at: index)
                nextID += 1
            } else {
                now += rng.next() % 16
                let due = reference.prefix { $0.deadline <= now }.map(\.id)
                reference.removeFirst(due.count)
                let popped = q.popDue(at: ns(now))
                #expect(popped == due, "seed \(seed) step \(step)")
                if popped != due { return }
            }
            #expect(q.count == reference.count)
            #expect(q.nextDeadline == reference.first.map { ns($0.deadline) })
        }
        let rest = q.popDue(at: ns(UInt64.max))
        #expect(rest == reference.map(\.id))
        #expect(q.count == 0)
    }

    @Test func worksWithAManualClock() {
        let clock = ManualClock()
        var q = DeadlineQueue<String>()
        q.push("idle", at: clock.now().advanced(bySeconds: 300))
        q.push("first-byte", at: clock.now().advanced(bySeconds: 120))
        q.push("connect", at: clock.now().advanced(bySeconds: 10))
        clock.advance(bySeconds: 10)
        #expect(q.popDue(at: clock.now()) == ["connect"])
        clock.advance(bySeconds: 109.999)
        #expect(q.popDue(at: clock.now()) == [])
        clock.advance(bySeconds: 200)
        #expect(q.popDue(at: clock.now()) == ["first-byte", "idle"])
    }
}
