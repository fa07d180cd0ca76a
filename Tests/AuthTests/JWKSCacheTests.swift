// JWKSCache: when to fetch, backoff after failures, last good key set kept through bad refreshes.
import Auth
import Foundation
import Support
import Testing

private let start = Support.Instant(nanoseconds: 1_000_000_000_000)
private func at(_ seconds: Double) -> Support.Instant { start.advanced(bySeconds: seconds) }

@Suite struct JWKSCacheTests {
    let policy = JWKSCache.Policy(refreshInterval: 3600, minimumInterval: 60, retryDelay: 5, maxRetryDelay: 300, fetchTimeout: 30)

    @Test func firstFetchAtOnceThenOnSchedule() {
        var cache = JWKSCache(policy: policy, now: at(0))
        #expect(cache.keys == nil)
        #expect(cache.currentKeys.isEmpty)
        #expect(cache.poll(now: at(0)) == .fetch)
        #expect(cache.fetchStartedAt == at(0))
        #expect(cache.poll(now: at(1)) == .wait(until: at(30))) // in flight
        guard case .replaced(let summary) = cache.receive(document: Fixtures.jwksData, now: at(2)) else {
            Issue.record("not replaced")
            return
        }
        #expect(summary.keyIDs == ["rsa-1", "rsa-2", "ec-1"])
        #expect(cache.keys?.keys.count == 3)
        #expect(cache.lastSuccess == at(2))
        #expect(cache.poll(now: at(3)) == .wait(until: at(3602)))
        #expect(cache.poll(now: at(3602)) == .fetch)
    }

    @Test func aBadRefreshKeepsTheLastGoodSetAndBacksOff() {
        var cache = JWKSCache(policy: policy, now: at(0))
        _ = cache.poll(now: at(0))
        cache.receive(document: Fixtures.jwksData, now: at(0))
        #expect(cache.poll(now: at(3600)) == .fetch)
        // Garbage, an empty set, a set of only unusable keys, a transport failure: the old set stays.
        let bad: [Data?] = [Data("<html>502</html>".utf8), Data("{\"keys\":[]}".utf8),
                            Data("{\"keys\":[{\"kty\":\"RSA\",\"use\":\"enc\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}".utf8), nil]
        var t = 3600.0
        var expectedDelays: [Double] = []
        for (index, document) in bad.enumerated() {
            if index > 0 {
                #expect(cache.poll(now: at(t)) == .fetch)
            }
            if let document {
                guard case .rejected = cache.receive(document: document, now: at(t)) else {
                    Issue.record("accepted a bad document")
                    return
                }
            } else {
                cache.fetchFailed(now: at(t))
            }
            #expect(cache.keys?.keys.map(\.keyID) == ["rsa-1", "rsa-2", "ec-1"])
            #expect(cache.consecutiveFailures == index + 1)
            let delay = cache.nextFetch.seconds(since: at(t))
            expectedDelays.append(delay)
            t += delay
        }
        #expect(expectedDelays == [5, 10, 20, 40])
        #expect(value(verifier(keys: cache.currentKeys).verify(rs256(), now: now)) != nil)
        // Recovery resets the backoff.
        #expect(cache.poll(now: at(t)) == .fetch)
        cache.receive(document: Fixtures.jwksData, now: at(t))
        #expect(cache.consecutiveFailures == 0)
        #expect(cache.nextFetch == at(t + 3600))
    }

    @Test func backoffIsCapped() {
        var cache = JWKSCache(policy: policy, now: at(0))
        var t = 0.0
        for _ in 0..<40 {
            #expect(cache.poll(now: at(t)) == .fetch)
            cache.fetchFailed(now: at(t))
            t += cache.nextFetch.seconds(since: at(t))
        }
        #expect(cache.nextFetch.seconds(since: at(t - 300)) == 300)
        #expect(cache.keys == nil)
    }

    @Test func maxAgeIsClamped() {
        var cache = JWKSCache(policy: policy, now: at(0))
        _ = cache.poll(now: at(0))
        cache.receive(document: Fixtures.jwksData, maxAge: 600, now: at(0))
        #expect(cache.nextFetch == at(600))
        _ = cache.poll(now: at(600))
        cache.receive(document: Fixtures.jwksData, maxAge: 1, now: at(600))
        #expect(cache.nextFetch == at(660))
        _ = cache.poll(now: at(660))
        cache.receive(document: Fixtures.jwksData, maxAge: 86_400, now: at(660))
        #expect(cache.nextFetch == at(4260))
    }

    @Test func anUnknownKidBringsTheNextFetchForwardButRateLimited() {
        var cache = JWKSCache(policy: policy, now: at(0))
        _ = cache.poll(now: at(0))
        cache.receive(document: Fixtures.jwksData, now: at(1))
        cache.keyNotFound(now: at(10))
        #expect(cache.poll(now: at(10)) == .wait(until: at(60))) // not before minimumInterval after the last fetch
        #expect(cache.poll(now: at(60)) == .fetch)
        cache.receive(document: Fixtures.jwksData, now: at(61))
        cache.keyNotFound(now: at(500))
        #expect(cache.poll(now: at(500)) == .fetch) // long enough since the last fetch: at once
        cache.receive(document: Fixtures.jwksData, now: at(501))
        for second in stride(from: 502.0, to: 560, by: 1) {
            cache.keyNotFound(now: at(second))
            #expect(cache.poll(now: at(second)) == .wait(until: at(560)))
        }
    }

    @Test func anUnansweredFetchTimesOutAsAFailure() {
        var cache = JWKSCache(policy: policy, now: at(0))
        #expect(cache.poll(now: at(0)) == .fetch)
        #expect(cache.poll(now: at(29)) == .wait(until: at(30)))
        #expect(cache.poll(now: at(30)) == .wait(until: at(35))) // counted as failure 1, retry after 5 s
        #expect(cache.consecutiveFailures == 1)
        #expect(cache.fetchStartedAt == nil)
        #expect(cache.poll(now: at(35)) == .fetch)
    }

    @Test func theVerifierFollowsTheCache() {
        var cache = JWKSCache(policy: policy, now: at(0))
        var relayVerifier = verifier([.rs256, .es256], keys: cache.currentKeys)
        #expect(failure(relayVerifier.verify(rs256(), now: now)) == .unknownKey)
        _ = cache.poll(now: at(0))
        cache.receive(document: try! JSONSerialization.data(withJSONObject: ["keys": [Fixtures.member("ec-1")]]), now: at(1))
        relayVerifier = relayVerifier.replacingKeys(cache.currentKeys)
        #expect(failure(relayVerifier.verify(rs256(), now: now)) == .unknownKey)
        #expect(value(relayVerifier.verify(es256(), now: now)) != nil)
        // Rotation: the provider now publishes only rsa-1.
        _ = cache.poll(now: at(3601))
        cache.receive(document: try! JSONSerialization.data(withJSONObject: ["keys": [Fixtures.member("rsa-1")]]), now: at(3601))
        relayVerifier = relayVerifier.replacingKeys(cache.currentKeys)
        #expect(value(relayVerifier.verify(rs256(), now: now)) != nil)
        #expect(failure(relayVerifier.verify(es256(), now: now)) == .unknownKey)
    }
}
