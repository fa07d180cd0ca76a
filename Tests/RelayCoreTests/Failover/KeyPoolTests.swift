// KeyPool: smooth weighted round robin over the keys that are not cooling down or disabled, on a manual clock.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite("Key pool")
struct KeyPoolTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)

    @Test("weights 2:1 give A B A, spread, and hold over 300 picks")
    func weights() {
        var pool = KeyPool(labels: ["a", "b"], weights: [2, 1])
        let first = (0..<3).map { _ in pool.pick(now: t0)! }
        #expect(first == [0, 1, 0])
        var counts = [0, 0]
        for _ in 0..<300 { counts[pool.pick(now: t0)!] += 1 }
        #expect(counts == [200, 100])
    }

    @Test("a cooling key is skipped until its end, exactly")
    func cooldown() {
        var pool = KeyPool(labels: ["a", "b"], weights: [1, 1])
        pool.markUnavailable(0, until: t0.advanced(bySeconds: 2), disabled: false, now: t0)
        for _ in 0..<5 {
            let picked = pool.pick(now: t0.advanced(bySeconds: 1.999))
            #expect(picked == 1)
        }
        #expect(pool.state(of: 0, now: t0) == .coolingDown)
        let end = t0.advanced(bySeconds: 2)
        let picks = (0..<4).map { _ in pool.pick(now: end)! }
        #expect(picks.contains(0))
        #expect(pool.state(of: 0, now: end) == .available)
    }

    @Test("every key unavailable: no pick, and the soonest return")
    func allUnavailable() {
        var pool = KeyPool(labels: ["a", "b"], weights: [1, 1])
        pool.markUnavailable(0, until: t0.advanced(bySeconds: 7), disabled: false, now: t0)
        #expect(pool.soonestReturn(now: t0) == nil)
        pool.markUnavailable(1, until: t0.advanced(bySeconds: 3), disabled: true, now: t0)
        let none = pool.pick(now: t0)
        #expect(none == nil)
        #expect(pool.soonestReturn(now: t0) == t0.advanced(bySeconds: 3))
        #expect(pool.state(of: 1, now: t0) == .disabled)
    }

    @Test("a shorter cooldown never shortens a disabled key; the rejection is news once")
    func laterEndWins() {
        var pool = KeyPool(labels: ["a"], weights: [1])
        let first = pool.markUnavailable(0, until: t0.advanced(bySeconds: 600), disabled: true, now: t0)
        let second = pool.markUnavailable(0, until: t0.advanced(bySeconds: 600), disabled: true, now: t0)
        #expect(first && !second)
        pool.markUnavailable(0, until: t0.advanced(bySeconds: 5), disabled: false, now: t0)
        #expect(pool.state(of: 0, now: t0.advanced(bySeconds: 100)) == .disabled)
    }

    @Test("excluded keys are not picked")
    func excluding() {
        var pool = KeyPool(labels: ["a", "b", "c"], weights: [5, 1, 1])
        for _ in 0..<10 {
            let picked = pool.pick(now: t0, excluding: [0])
            #expect(picked != 0)
        }
        let none = pool.pick(now: t0, excluding: [0, 1, 2])
        #expect(none == nil)
    }
}
