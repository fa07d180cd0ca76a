// RateLimiterState: burst then 429, refill to the nanosecond with exact Retry-After values, the concurrency cap
// and its release, independent keys, idle pruning, bounded memory under 100 000 distinct keys (and the overflow
// bucket once the table is full of busy keys), and the locked wrapper under real threads.
import Dispatch
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing
import TestSupportCore

private let second: UInt64 = 1_000_000_000

private func limiter(
    rpm: Int?, burst: Int? = nil, streams: Int? = nil, maxKeys: Int = 100_000
) -> RateLimiterState {
    RateLimiterState(limits: RateLimits(requestsPerMinute: rpm, burst: burst, maxConcurrentStreams: streams, maxKeys: maxKeys))
}

private func lease(_ d: RateLimiterState.Decision, sourceLocation: SourceLocation = #_sourceLocation) -> RateLimiterState.Lease? {
    guard case .allowed(let lease) = d else {
        Issue.record("expected allowed, got \(d)", sourceLocation: sourceLocation)
        return nil
    }
    return lease
}

private func isAllowed(_ d: RateLimiterState.Decision) -> Bool {
    if case .allowed = d { return true }
    return false
}

@Suite struct RateLimiterTests {
    // MARK: rate

    @Test func theBurstIsAdmittedThenTheNextIsLimited() {
        var s = limiter(rpm: 60, burst: 3)
        for _ in 0..<3 { #expect(isAllowed(s.acquire(key: "k", now: t0))) }
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(s.acquire(key: "k", now: justBefore(1)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(isAllowed(s.acquire(key: "k", now: at(1))))
        #expect(s.acquire(key: "k", now: at(1)) == .limited(retryAfterSeconds: 1, reason: .rate))
    }

    @Test func burstDefaultsToTheRate() {
        var s = limiter(rpm: 5)
        #expect(s.limits.burst == 5)
        for _ in 0..<5 { #expect(isAllowed(s.acquire(key: "k", now: t0))) }
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 12, reason: .rate))
    }

    @Test func retryAfterIsTheWholeSecondsUntilOneToken() {
        // 7 per minute: one token every 60/7 s = 8.571428571428… s, i.e. 8 571 428 572 ns rounded up.
        var s = limiter(rpm: 7, burst: 1)
        #expect(isAllowed(s.acquire(key: "k", now: t0)))
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 9, reason: .rate))
        #expect(s.acquire(key: "k", now: at(1)) == .limited(retryAfterSeconds: 8, reason: .rate))
        #expect(s.acquire(key: "k", now: at(7, plusNanoseconds: 571_428_571)) == .limited(retryAfterSeconds: 2, reason: .rate))
        #expect(s.acquire(key: "k", now: at(7, plusNanoseconds: 571_428_572)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(s.acquire(key: "k", now: at(8, plusNanoseconds: 571_428_571)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(isAllowed(s.acquire(key: "k", now: at(8, plusNanoseconds: 571_428_572))))
        // The next token is exactly one interval after the bucket reached one token, not after the request.
        #expect(s.acquire(key: "k", now: at(9)) == .limited(retryAfterSeconds: 9, reason: .rate))
    }

    @Test func retryAfterAtSlowAndFastRates() {
        var slow = limiter(rpm: 1, burst: 1)
        #expect(isAllowed(slow.acquire(key: "k", now: t0)))
        #expect(slow.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 60, reason: .rate))
        #expect(slow.acquire(key: "k", now: at(30)) == .limited(retryAfterSeconds: 30, reason: .rate))
        #expect(slow.acquire(key: "k", now: at(59, plusNanoseconds: 1)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(isAllowed(slow.acquire(key: "k", now: at(60))))

        var fast = limiter(rpm: 120, burst: 1)   // a token every half second: still "1", never "0"
        #expect(isAllowed(fast.acquire(key: "k", now: t0)))
        #expect(fast.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(isAllowed(fast.acquire(key: "k", now: at(0, plusNanoseconds: second / 2))))
    }

    @Test func refillStopsAtTheBurst() {
        var s = limiter(rpm: 6, burst: 2)
        #expect(isAllowed(s.acquire(key: "k", now: t0)))
        #expect(isAllowed(s.acquire(key: "k", now: t0)))
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 10, reason: .rate))
        let later = at(100_000)   // far longer than needed to refill
        #expect(isAllowed(s.acquire(key: "k", now: later)))
        #expect(isAllowed(s.acquire(key: "k", now: later)))
        #expect(s.acquire(key: "k", now: later) == .limited(retryAfterSeconds: 10, reason: .rate))
    }

    @Test func aLimitedRequestConsumesNothing() {
        var s = limiter(rpm: 60, burst: 1)
        #expect(isAllowed(s.acquire(key: "k", now: t0)))
        for i in 0..<100 { _ = s.acquire(key: "k", now: at(0, plusNanoseconds: UInt64(i))) }
        #expect(isAllowed(s.acquire(key: "k", now: at(1))), "refused requests did not push the refill back")
    }

    @Test func timeRunningBackwardsCountsAsNoTime() {
        var s = limiter(rpm: 60, burst: 1)
        #expect(isAllowed(s.acquire(key: "k", now: at(10))))
        #expect(s.acquire(key: "k", now: at(5)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(s.acquire(key: "k", now: justBefore(11)) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(isAllowed(s.acquire(key: "k", now: at(11))))
    }

    @Test func keysAreIndependent() {
        var s = limiter(rpm: 60, burst: 1, streams: 1)
        #expect(isAllowed(s.acquire(key: "alice", now: t0)))
        #expect(s.acquire(key: "alice", now: at(2)) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        #expect(isAllowed(s.acquire(key: "bob", now: t0)))
        #expect(isAllowed(s.acquire(key: "10.0.0.7", now: t0)))
        #expect(s.openStreams(key: "alice") == 1)
        #expect(s.openStreams(key: "bob") == 1)
        #expect(s.trackedKeys == 3)
    }

    // MARK: concurrency

    @Test func theStreamCapHoldsUntilALeaseIsReleased() throws {
        var s = limiter(rpm: nil, streams: 2)
        let a = try #require(lease(s.acquire(key: "k", now: t0)))
        let b = try #require(lease(s.acquire(key: "k", now: t0)))
        #expect(a != b)
        #expect(s.acquire(key: "k", now: at(1)) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        #expect(s.openStreams(key: "k") == 2)
        s.release(a)
        #expect(s.openStreams(key: "k") == 1)
        let c = try #require(lease(s.acquire(key: "k", now: at(2))))
        s.release(a)   // twice: no effect
        #expect(s.openStreams(key: "k") == 2)
        #expect(s.acquire(key: "k", now: at(2)) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        s.release(b)
        s.release(c)
        #expect(s.openStreams(key: "k") == 0)
    }

    @Test func concurrencyIsCheckedFirstAndConsumesNoToken() throws {
        var s = limiter(rpm: 60, burst: 2, streams: 1)
        let first = try #require(lease(s.acquire(key: "k", now: t0)))
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        s.release(first)
        let second = try #require(lease(s.acquire(key: "k", now: t0)), "the refused request left the second token")
        s.release(second)
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .rate))
        #expect(s.openStreams(key: "k") == 0, "a rate refusal opens no stream")
    }

    @Test func aZeroStreamCapRefusesEverythingAndTracksNothing() {
        var s = limiter(rpm: 60, streams: 0)
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        #expect(s.trackedKeys == 0)
    }

    @Test func withNoLimitsEverythingIsAllowedAndNothingTracked() throws {
        var s = limiter(rpm: nil)
        for i in 0..<1000 { #expect(isAllowed(s.acquire(key: "k\(i % 7)", now: t0))) }
        #expect(s.trackedKeys == 0)
        s.release(try #require(lease(s.acquire(key: "k", now: t0))))
    }

    @Test func concurrencyRetryAfterIsConfigurable() {
        var s = RateLimiterState(limits: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 1, concurrencyRetryAfterSeconds: 5))
        _ = s.acquire(key: "k", now: t0)
        #expect(s.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 5, reason: .concurrency))
    }

    // MARK: errors

    @Test func decisionsMapToThe429s() throws {
        let rate = try #require(RateLimiterState.Decision.limited(retryAfterSeconds: 9, reason: .rate).error)
        #expect(rate.status == 429)
        #expect(rate.code == "rate_limit_exceeded")
        #expect(rate.extraHeaders.map { "\($0.0): \($0.1)" } == ["Retry-After: 9"])
        let streams = try #require(RateLimiterState.Decision.limited(retryAfterSeconds: 1, reason: .concurrency).error)
        #expect(streams.status == 429)
        #expect(streams.code == "concurrency_limit_exceeded")
        #expect(streams.extraHeaders.map { "\($0.0): \($0.1)" } == ["Retry-After: 1"])
        var s = limiter(rpm: 1)
        #expect(s.acquire(key: "k", now: t0).error == nil)
    }

    // MARK: memory

    @Test func pruneForgetsOnlyIdleKeys() throws {
        var s = limiter(rpm: 60, burst: 2, streams: 5)
        let short = try #require(lease(s.acquire(key: "short", now: t0)))
        let long = try #require(lease(s.acquire(key: "long", now: t0)))
        s.release(short)
        #expect(s.trackedKeys == 2)
        #expect(s.prune(now: justBefore(1)) == 0, "neither bucket is full yet")
        #expect(s.prune(now: at(1)) == 1, "short's bucket is full and it has no stream")
        #expect(s.trackedKeys == 1)
        #expect(s.openStreams(key: "long") == 1)
        #expect(s.prune(now: at(1000)) == 0, "an open stream keeps its key")
        s.release(long)
        #expect(s.prune(now: at(1000)) == 1)
        #expect(s.trackedKeys == 0)
        // A forgotten key starts over with a full bucket, exactly as if it had been kept.
        #expect(isAllowed(s.acquire(key: "short", now: at(1000))))
        #expect(isAllowed(s.acquire(key: "short", now: at(1000))))
        #expect(s.acquire(key: "short", now: at(1000)) == .limited(retryAfterSeconds: 1, reason: .rate))
    }

    @Test func idleKeysAreSweptOnSchedule() {
        var s = limiter(rpm: 60, burst: 1)
        for i in 0..<50 { #expect(isAllowed(s.acquire(key: "k\(i)", now: t0))) }
        #expect(isAllowed(s.acquire(key: "x", now: at(30))))
        #expect(isAllowed(s.acquire(key: "z", now: justBefore(60))))
        #expect(s.trackedKeys == 52, "no sweep before the interval")
        #expect(isAllowed(s.acquire(key: "y", now: at(60))))
        #expect(s.trackedKeys == 2, "the sweep at 60 s forgot every idle key; z is still refilling, y was just used")
    }

    @Test func memoryStaysBoundedUnderOneHundredThousandDistinctKeys() {
        var s = limiter(rpm: 600, burst: 1, streams: 4, maxKeys: 1000)
        var peak = 0
        for i in 0..<100_000 {
            let decision = s.acquire(key: "client-\(i)", now: at(0, plusNanoseconds: UInt64(i) * 1_000_000))
            guard case .allowed(let lease) = decision, !lease.isOverflow else {
                Issue.record("request \(i): \(decision)")
                return
            }
            s.release(lease)
            peak = max(peak, s.trackedKeys)
        }
        #expect(peak == 1000, "the table filled up to its cap, and no further")
        #expect(s.trackedKeys <= 1000)
        let remaining = s.trackedKeys
        #expect(s.prune(now: at(200)) == remaining, "once every bucket has refilled, all are forgotten")
        #expect(s.trackedKeys == 0)
    }

    @Test func aTableFullOfBusyKeysSendsNewKeysToOneSharedBucket() throws {
        var s = limiter(rpm: 60, burst: 1, maxKeys: 1000)
        for i in 0..<100_000 { _ = s.acquire(key: "spray-\(i)", now: t0) }
        #expect(s.trackedKeys == 1000)
        #expect(s.acquire(key: "spray-0", now: t0) == .limited(retryAfterSeconds: 1, reason: .rate),
                "a tracked key keeps its limit: spraying new keys never evicts it")
        #expect(s.acquire(key: "newcomer", now: t0) == .limited(retryAfterSeconds: 1, reason: .rate),
                "spray-1000 took the overflow bucket's one token; every later new key shares it")
        // A second later every tracked bucket is full again: the next new key sweeps them all away.
        let newcomer = try #require(lease(s.acquire(key: "newcomer", now: at(1))))
        #expect(!newcomer.isOverflow)
        #expect(s.trackedKeys == 1)
    }

    @Test func overflowLeasesShareOneStreamCap() throws {
        var s = limiter(rpm: nil, streams: 1, maxKeys: 2)
        let a = try #require(lease(s.acquire(key: "a", now: t0)))
        _ = try #require(lease(s.acquire(key: "b", now: t0)))
        let c = try #require(lease(s.acquire(key: "c", now: t0)))
        #expect(c.isOverflow)
        #expect(s.acquire(key: "d", now: t0) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        s.release(c)
        #expect(s.overflowStreams == 0)
        let d = try #require(lease(s.acquire(key: "d", now: t0)))
        #expect(d.isOverflow)
        #expect(s.overflowStreams == 1)
        // a becomes idle, but a sweep that freed nothing is not repeated within the same second.
        s.release(a)
        #expect(s.acquire(key: "e", now: t0) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        let e = try #require(lease(s.acquire(key: "e", now: at(1))))
        #expect(!e.isOverflow)
        #expect(s.openStreams(key: "e") == 1)
        #expect(s.openStreams(key: "a") == 0)
        s.release(d)
        #expect(s.overflowStreams == 0)
    }

    @Test func aRefundGoesBackToTheBucketItCameFrom() throws {
        var s = limiter(rpm: 1, burst: 1, maxKeys: 1)
        let own = try #require(lease(s.acquire(key: "a", now: t0)))
        let shared = try #require(lease(s.acquire(key: "b", now: t0)))
        #expect(!own.isOverflow && shared.isOverflow)
        #expect(s.acquire(key: "c", now: t0) == .limited(retryAfterSeconds: 60, reason: .rate), "b took the overflow bucket's one token")
        s.refund(shared, now: t0)
        let c = try #require(lease(s.acquire(key: "c", now: t0)), "b's token is back in the overflow bucket")
        #expect(c.isOverflow)
        #expect(s.acquire(key: "a", now: t0) == .limited(retryAfterSeconds: 60, reason: .rate), "the shared refund left a's bucket alone")
        s.refund(own, now: t0)
        #expect(isAllowed(s.acquire(key: "a", now: t0)))
        // A full bucket stays full: refunds past the burst give nothing more.
        s.refund(own, now: t0)
        s.refund(own, now: t0)
        #expect(isAllowed(s.acquire(key: "a", now: t0)))
        #expect(s.acquire(key: "a", now: t0) == .limited(retryAfterSeconds: 60, reason: .rate))
    }

    @Test func aKeyWithoutItsOwnBucketIsNeverRefusedBeforeItFails() throws {
        var s = limiter(rpm: 1, burst: 1, maxKeys: 1)
        _ = try #require(lease(s.acquire(key: "a", now: t0)))
        _ = try #require(lease(s.acquire(key: "b", now: t0)))   // the overflow bucket's one token
        #expect(s.acquire(key: "c", now: t0) == .limited(retryAfterSeconds: 60, reason: .rate))
        // A flood of failures from keys past the table empties the shared bucket; a new client's credentials are
        // still read (its own failure is what `acquire` then refuses).
        #expect(s.retryAfterIfEmpty(key: "c", now: t0) == nil)
        #expect(s.retryAfterIfEmpty(key: "a", now: t0) == 60, "a tracked key's own empty bucket refuses")
    }

    // MARK: the shared wrapper

    @Test func theSharedLimiterCountsExactlyAcrossThreads() {
        let shared = RateLimiter(limits: RateLimits(requestsPerMinute: 60, burst: 1000))
        let allowed = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var mine = 0
            for _ in 0..<500 where isAllowed(shared.acquire(key: "k", now: t0)) { mine += 1 }
            allowed.withLock { $0 += mine }
        }
        #expect(allowed.withLock { $0 } == 1000)
        #expect(shared.trackedKeys == 1)
        #expect(shared.prune(now: at(1000)) == 1)
    }

    @Test func theSharedLimiterReleasesLeases() throws {
        let shared = RateLimiter(limits: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 1))
        let first = try #require(lease(shared.acquire(key: "k", now: t0)))
        #expect(shared.acquire(key: "k", now: t0) == .limited(retryAfterSeconds: 1, reason: .concurrency))
        shared.release(first)
        #expect(isAllowed(shared.acquire(key: "k", now: t0)))
        #expect(shared.limits.maxConcurrentStreams == 1)
    }
}
