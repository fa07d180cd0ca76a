// Support's `Locked` with `Atomic`'s calls, which the relay's counters and flags use instead of
// `Synchronization.Atomic` (macOS 15): the same results, wraparound included, and no update lost across threads.
import Dispatch
import Support
import Testing

@Suite struct LockedAtomicTests {
    @Test func theCallsReturnWhatAtomicsReturn() {
        let counter = Locked(5)
        #expect(counter.wrappingAdd(3, ordering: .relaxed) == (oldValue: 5, newValue: 8))
        #expect(counter.wrappingSubtract(10, ordering: .relaxed) == (oldValue: 8, newValue: -2))
        #expect(counter.add(2, ordering: .relaxed).newValue == 0)
        #expect(counter.subtract(1, ordering: .relaxed).newValue == -1)
        counter.store(Int.max, ordering: .relaxed)
        #expect(counter.wrappingAdd(1, ordering: .relaxed).newValue == Int.min)
        #expect(counter.load(ordering: .relaxed) == Int.min)

        let flag = Locked(false)
        #expect(flag.exchange(true, ordering: .relaxed) == false)
        #expect(flag.exchange(true, ordering: .relaxed) == true)
        #expect(flag.load(ordering: .relaxed))

        let unsigned = Locked<UInt64>(0)
        #expect(unsigned.wrappingSubtract(1, ordering: .relaxed).newValue == UInt64.max)
    }

    @Test func noUpdateIsLostAcrossThreads() {
        let counter = Locked(0)
        let gauge = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            for _ in 0..<10_000 {
                counter.wrappingAdd(i + 1, ordering: .relaxed)
                gauge.wrappingAdd(1, ordering: .relaxed)
                gauge.wrappingSubtract(1, ordering: .relaxed)
            }
        }
        #expect(counter.load(ordering: .relaxed) == 10_000 * (1...8).reduce(0, +))
        #expect(gauge.load(ordering: .relaxed) == 0)
    }
}
