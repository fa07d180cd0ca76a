// FailoverPlan: which call follows which outcome, on a manual clock.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite("Failover plan")
struct FailoverPlanTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)

    func plan(_ upstreams: [String] = ["p", "s"], maxAttempts: Int = 3, firstByte: Double = 120, replayable: Bool = false) -> FailoverPlan {
        FailoverPlan(settings: .init(upstreams: upstreams, keyDisabledSeconds: upstreams.map { _ in 600 },
                                     maxAttempts: maxAttempts, deadline: t0.advanced(bySeconds: firstByte), replayable: replayable))
    }

    @Test("a 429 cools the key for its Retry-After and the next key of the same upstream goes")
    func rateLimitRotatesKey() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1]), KeyPool(labels: ["x"], weights: [1])]
        var plan = plan()
        #expect(plan.start(pools: &pools, now: t0) == .call(upstream: 0, key: 0))
        let next = plan.next(after: .answered(status: 429, retryAfterSeconds: 2), pools: &pools, now: t0)
        #expect(next == .call(upstream: 0, key: 1))
        #expect(pools[0].state(of: 0, now: t0.advanced(bySeconds: 1.9)) == .coolingDown)
        #expect(pools[0].state(of: 0, now: t0.advanced(bySeconds: 2)) == .available)
        #expect(plan.failoverField == "429")
    }

    @Test("a 429 without Retry-After cools 5 s; one above 300 s is held to 300")
    func cooldownBounds() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var plan = plan(["p"])
        _ = plan.start(pools: &pools, now: t0)
        _ = plan.next(after: .answered(status: 429, retryAfterSeconds: nil), pools: &pools, now: t0)
        #expect(pools[0].keys[0].until == t0.advanced(bySeconds: 5))
        _ = plan.next(after: .answered(status: 429, retryAfterSeconds: 10_000), pools: &pools, now: t0)
        #expect(pools[0].keys[1].until == t0.advanced(bySeconds: 300))
    }

    @Test("all keys 429: given up with the largest Retry-After")
    func allRateLimited() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var plan = plan(["p"])
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 7), pools: &pools, now: t0) == .call(upstream: 0, key: 1))
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 3), pools: &pools, now: t0) == .give)
        #expect(plan.largestRetryAfterSeconds == 7)
    }

    @Test("a 401 has the next key tried, and disables its key once that key is accepted for the same request")
    func rejectedKey() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var plan = plan(["p"])
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.headReceived(status: 401, pools: &pools, now: t0).isEmpty)
        #expect(plan.next(after: .answered(status: 401, retryAfterSeconds: nil), pools: &pools, now: t0) == .call(upstream: 0, key: 1))
        #expect(pools[0].isAvailable(0, now: t0), "disabled before another key showed the request was fine")
        #expect(plan.headReceived(status: 200, pools: &pools, now: t0) == [.init(upstream: 0, key: 0, isNews: true)])
        #expect(pools[0].state(of: 0, now: t0.advanced(bySeconds: 599)) == .disabled)
        #expect(pools[0].state(of: 0, now: t0.advanced(bySeconds: 600)) == .available)
        // Reported once: a key another request (or replica) disabled meanwhile is disabled again, but is no news.
        var fresh = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var again = self.plan(["p"])
        #expect(again.start(pools: &fresh, now: t0) == .call(upstream: 0, key: 0))
        _ = again.next(after: .answered(status: 401, retryAfterSeconds: nil), pools: &fresh, now: t0)
        fresh[0].markUnavailable(0, until: t0.advanced(bySeconds: 100), disabled: true, now: t0)
        #expect(again.headReceived(status: 429, pools: &fresh, now: t0) == [.init(upstream: 0, key: 0, isNews: false)])
        #expect(fresh[0].state(of: 0, now: t0.advanced(bySeconds: 599)) == .disabled)
    }

    @Test("a request every key answers 401, or one a 5xx follows, disables no key")
    func requestRefusedByEveryKey() {
        var pools = [KeyPool(labels: ["a", "b", "c"], weights: [1, 1, 1])]
        var plan = plan(["p"])
        _ = plan.start(pools: &pools, now: t0)
        for _ in 0..<2 {
            #expect(plan.headReceived(status: 401, pools: &pools, now: t0).isEmpty)
            _ = plan.next(after: .answered(status: 401, retryAfterSeconds: nil), pools: &pools, now: t0)
        }
        #expect(plan.headReceived(status: 401, pools: &pools, now: t0).isEmpty)
        #expect(plan.next(after: .answered(status: 401, retryAfterSeconds: nil), pools: &pools, now: t0) == .give)
        #expect((0..<3).allSatisfy { pools[0].isAvailable($0, now: t0) })
        var gateway = self.plan()
        var two = [KeyPool(labels: ["a"], weights: [1]), KeyPool(labels: ["x"], weights: [1])]
        _ = gateway.start(pools: &two, now: t0)
        #expect(gateway.next(after: .answered(status: 401, retryAfterSeconds: nil), pools: &two, now: t0) == .call(upstream: 1, key: 0))
        #expect(gateway.headReceived(status: 502, pools: &two, now: t0).isEmpty)
        #expect(two[0].isAvailable(0, now: t0))
    }

    @Test("a 403 is given to the client: no key is disabled and no other key is tried")
    func forbiddenIsTheRequests() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var plan = plan(["p"])
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.headReceived(status: 403, pools: &pools, now: t0).isEmpty)
        #expect(plan.next(after: .answered(status: 403, retryAfterSeconds: nil), pools: &pools, now: t0) == .give)
        #expect(pools[0].isAvailable(0, now: t0) && pools[0].isAvailable(1, now: t0))
        #expect(!FailoverPlan.mayRetry(status: 403, replayable: true))
    }

    @Test("503, 529 and unreachable move to the next upstream; other statuses are given")
    func fallback() {
        for replayable in [false, true] {
            for outcome in [FailoverPlan.Outcome.answered(status: 503, retryAfterSeconds: nil), .answered(status: 529, retryAfterSeconds: nil),
                            .unreachable] {
                var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1]), KeyPool(labels: ["x"], weights: [1])]
                var plan = plan(replayable: replayable)
                _ = plan.start(pools: &pools, now: t0)
                #expect(plan.next(after: outcome, pools: &pools, now: t0) == .call(upstream: 1, key: 0))
                #expect(pools[0].isAvailable(0, now: t0), "a server error does not cool the key")
            }
            for status in [200, 400, 404, 408, 413, 422, 501] {
                var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1]), KeyPool(labels: ["x"], weights: [1])]
                var plan = plan(replayable: replayable)
                _ = plan.start(pools: &pools, now: t0)
                #expect(plan.next(after: .answered(status: status, retryAfterSeconds: nil), pools: &pools, now: t0) == .give)
            }
        }
    }

    @Test("a 500, 502 or 504 is given for a request that may not be replayed, and moves on for one that may")
    func serverErrorMovesOnOnlyWhenReplayable() {
        for status in [500, 502, 504] {
            for replayable in [false, true] {
                var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1]), KeyPool(labels: ["x"], weights: [1])]
                var plan = plan(replayable: replayable)
                _ = plan.start(pools: &pools, now: t0)
                let step = plan.next(after: .answered(status: status, retryAfterSeconds: nil), pools: &pools, now: t0)
                #expect(step == (replayable ? .call(upstream: 1, key: 0) : .give), "\(status), replayable: \(replayable)")
                #expect(FailoverPlan.mayRetry(status: status, replayable: replayable) == replayable)
            }
        }
    }

    @Test("a pool whose keys all cooled down falls back to the next upstream, at the start too")
    func poolExhausted() {
        var pools = [KeyPool(labels: ["a"], weights: [1]), KeyPool(labels: ["x"], weights: [1])]
        var plan = plan()
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 30), pools: &pools, now: t0) == .call(upstream: 1, key: 0))
        var later = self.plan()
        #expect(later.start(pools: &pools, now: t0.advanced(bySeconds: 1)) == .call(upstream: 1, key: 0))
    }

    @Test("maxAttempts holds")
    func maxAttempts() {
        var pools = [KeyPool(labels: ["a", "b", "c", "d"], weights: [1, 1, 1, 1])]
        var plan = plan(["p"], maxAttempts: 2)
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 1), pools: &pools, now: t0) == .call(upstream: 0, key: 1))
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 1), pools: &pools, now: t0) == .give)
        #expect(plan.attempts == 2)
    }

    @Test("no call starts at or after the first-byte deadline")
    func timeBound() {
        var pools = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        var plan = plan(["p"], firstByte: 10)
        _ = plan.start(pools: &pools, now: t0)
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: 1), pools: &pools, now: t0.advanced(bySeconds: 10)) == .give)
        var early = self.plan(["p"], firstByte: 10)
        var fresh = [KeyPool(labels: ["a", "b"], weights: [1, 1])]
        _ = early.start(pools: &fresh, now: t0)
        #expect(early.next(after: .answered(status: 429, retryAfterSeconds: 1), pools: &fresh, now: t0.advanced(bySeconds: 9.999)) == .call(upstream: 0, key: 1))
    }

    @Test("no key anywhere: the soonest return, and whether any key only cools down")
    func noKey() {
        var pools = [KeyPool(labels: ["a"], weights: [1]), KeyPool(labels: ["x"], weights: [1])]
        pools[0].markUnavailable(0, until: t0.advanced(bySeconds: 4), disabled: true, now: t0)
        pools[1].markUnavailable(0, until: t0.advanced(bySeconds: 9), disabled: false, now: t0)
        var plan = plan()
        #expect(plan.start(pools: &pools, now: t0) == .noKeyAvailable(retryAfterSeconds: 4, anyCoolingDown: true))
    }

    @Test("an upstream without keys is called once, with no key")
    func keyless() {
        var pools = [KeyPool(labels: [], weights: []), KeyPool(labels: [], weights: [])]
        var plan = plan()
        #expect(plan.start(pools: &pools, now: t0) == .call(upstream: 0, key: nil))
        #expect(plan.next(after: .answered(status: 429, retryAfterSeconds: nil), pools: &pools, now: t0) == .call(upstream: 1, key: nil))
        #expect(plan.next(after: .unreachable, pools: &pools, now: t0) == .give)
        #expect(plan.failoverField == "429>unreachable")
    }

    @Test("only statuses the plan may retry are held back")
    func held() {
        for replayable in [false, true] {
            #expect([401, 429, 503, 529].allSatisfy { FailoverPlan.mayRetry(status: $0, replayable: replayable) })
            #expect(![200, 204, 400, 403, 404, 409, 501, 505].contains { FailoverPlan.mayRetry(status: $0, replayable: replayable) })
        }
    }
}
