// LogThrottle: at most `linesPerSecond` lines per reason per second, and one count of the rest.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Support
import Testing

@Suite struct LogThrottleTests {
    let t0 = Instant(nanoseconds: 5_000_000_000)

    @Test func passesTheFirstLinesOfEachSecondAndCountsTheRest() {
        var throttle = LogThrottle(linesPerSecond: 3)
        var decisions: [LogThrottle.Decision] = []
        for i in 0..<10 { decisions.append(throttle.admit("unauthorized", now: t0.advanced(byNanoseconds: UInt64(i) * 1_000_000))) }
        #expect(decisions.prefix(3).allSatisfy { $0 == .log(suppressedBefore: 0) })
        #expect(decisions.dropFirst(3).allSatisfy { $0 == .suppress })
        // The window ends exactly one second after its first line: the next line carries the count.
        #expect(throttle.admit("unauthorized", now: t0.advanced(bySeconds: 1)) == .log(suppressedBefore: 7))
        #expect(throttle.admit("unauthorized", now: t0.advanced(bySeconds: 1)) == .log(suppressedBefore: 0))
    }

    @Test func oneSecondMinusANanosecondIsStillTheSameWindow() {
        var throttle = LogThrottle(linesPerSecond: 1)
        #expect(throttle.admit("r", now: t0) == .log(suppressedBefore: 0))
        #expect(throttle.admit("r", now: t0.advanced(byNanoseconds: 999_999_999)) == .suppress)
        #expect(throttle.admit("r", now: t0.advanced(byNanoseconds: 1_000_000_000)) == .log(suppressedBefore: 1))
    }

    @Test func reasonsHaveTheirOwnShare() {
        var throttle = LogThrottle(linesPerSecond: 1)
        #expect(throttle.admit("unauthorized", now: t0) == .log(suppressedBefore: 0))
        #expect(throttle.admit("unauthorized", now: t0) == .suppress)
        #expect(throttle.admit("rate_limited", now: t0) == .log(suppressedBefore: 0))
    }

    @Test func flushReportsEndedWindowsOnceAndOnlyThoseWithSuppressedLines() {
        var throttle = LogThrottle(linesPerSecond: 1)
        _ = throttle.admit("a", now: t0)
        _ = throttle.admit("a", now: t0)
        _ = throttle.admit("a", now: t0)
        _ = throttle.admit("b", now: t0)
        #expect(throttle.flush(now: t0.advanced(bySeconds: 0.5)).isEmpty)
        let flushed = throttle.flush(now: t0.advanced(bySeconds: 1))
        #expect(flushed.map(\.reason) == ["a"])
        #expect(flushed.map(\.suppressed) == [2])
        #expect(throttle.flush(now: t0.advanced(bySeconds: 2)).isEmpty)
        // After a flush the next line starts a fresh window with nothing left to report.
        #expect(throttle.admit("a", now: t0.advanced(bySeconds: 2)) == .log(suppressedBefore: 0))
    }
}

@Suite struct FailureBucketPeekTests {
    @Test func peekTakesNothingAndAnswersTheRetryAfterAcquireWould() {
        let now = Instant(nanoseconds: 1_000_000_000)
        var state = RateLimiterState(limits: RateLimits(requestsPerMinute: 30, burst: 2))
        #expect(state.retryAfterIfEmpty(key: "a", now: now) == nil)
        guard case .allowed = state.acquire(key: "a", now: now), case .allowed = state.acquire(key: "a", now: now) else {
            Issue.record("burst of 2 not admitted")
            return
        }
        #expect(state.retryAfterIfEmpty(key: "a", now: now) == 2)
        #expect(state.retryAfterIfEmpty(key: "a", now: now) == 2, "peeking twice takes nothing")
        #expect(state.acquire(key: "a", now: now) == .limited(retryAfterSeconds: 2, reason: .rate))
        #expect(state.retryAfterIfEmpty(key: "a", now: now.advanced(bySeconds: 2)) == nil)
        #expect(state.retryAfterIfEmpty(key: "b", now: now) == nil)
    }
}
