import Foundation
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import RelayTestSupport
import TestHarness
import Testing
import TestSupportCore

/// A dollar budget shared by three relay processes through one real `redis-server` (issue 23): 50 concurrent
/// requests never reserve more than the budget, and the settled spend is the exact sum of the real costs.
@Suite("Dollar budgets across replicas", .serialized)
struct DollarReplicaTests {
    /// gpt-4o-mini at $10 per million both ways: 10 000 n$ a token. Each request reserves its prompt estimate plus
    /// `max_tokens` 100 (about a million n$); each stream costs 9 + 2 tokens = 110 000 n$.
    static let extra = #", "pricing": {"gpt-4o-mini*": {"input": 10, "output": 10}}, "#
        + #""budgets": {"perIdentity": {"usdPerDay": 0.01, "tokensPerDay": 1000000}, "onExceed": "cut"}"#
    static let budget = 10_000_000

    static func nano(_ usd: Any?) -> Int? {
        guard let text = usd as? String else { return nil }
        let parts = text.split(separator: ".")
        guard parts.count == 2, let whole = Int(parts[0]), let fraction = Int(parts[1]), parts[1].count == 9 else { return nil }
        return whole * 1_000_000_000 + fraction
    }

    static func day(_ relay: RelayProcess) throws -> [String: Any] {
        let report = try ReplicaTests.usage(relay)
        return try #require((report["windows"] as? [[String: Any]])?.first { $0["window"] as? String == "day" })
    }

    @Test("a daily dollar budget holds under 50 concurrent requests across three replicas")
    func dollarBudgetUnderConcurrency() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let upstream = try ReplicaTests.HeldUpstream()
        defer { upstream.server.shutdown() }
        let relays = try ReplicaTests.startReplicas(upstream: upstream.server.port, redis: redis, extra: Self.extra)
        let burst = try ReplicaTests.concurrentBurst(relays, upstream)
        let admitted = burst.admitted
        let held = try Self.day(relays[0])
        let reserved = try #require(Self.nano(held["reservedUSD"]))
        #expect(held["limitUSD"] as? String == "0.010000000")
        #expect(admitted >= 1 && admitted < 50)
        #expect(reserved <= Self.budget, "reserved \(reserved) n$ of \(Self.budget) by \(admitted) streams")
        let perRequest = reserved / admitted
        #expect(perRequest >= 1_000_000, "each reservation covers max_tokens at the output price")
        #expect(Self.budget - reserved < perRequest, "refused only when one more reservation would not fit")
        try ReplicaTests.release(burst, upstream)
        var settled: [String: Any] = [:]
        try eventually("settled: \(settled)", timeout: 10) {
            settled = try Self.day(relays[1])
            return settled["reservedUSD"] as? String == "0.000000000"
        }
        let used = try #require(Self.nano(settled["usedUSD"]))
        #expect(used == admitted * 110_000, "each stream charged its exact cost")
        #expect(used <= Self.budget + perRequest, "never above the budget by more than one request's reservation")
    }
}
