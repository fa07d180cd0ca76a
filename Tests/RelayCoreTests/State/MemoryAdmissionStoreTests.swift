// MemoryAdmissionStore: one atomic admission over the buckets, stream caps and budgets; grants settled once.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Support
import Testing
import Transport

@Suite struct MemoryAdmissionStoreTests {
    static let dec15 = Int64(1_797_328_800)   // 2026-12-15T10:00:00Z

    static func store(perAddress: RateLimits? = nil, perIdentity: RateLimits? = nil,
                      budgets: BudgetConfiguration? = nil) -> MemoryAdmissionStore {
        var limits = RelayConfiguration.RateLimitSettings()
        limits.perAddress = perAddress
        limits.perIdentity = perIdentity
        return MemoryAdmissionStore(rateLimits: limits, budgets: budgets, wallClock: { Double(dec15) })
    }

    static func request(_ identity: String? = "app", tokens: Int? = nil) -> AdmissionRequest {
        AdmissionRequest(address: "192.0.2.1", identity: identity, budget: tokens.map { BudgetCharge(key: identity ?? "192.0.2.1", tokens: $0) },
                         wallClockSeconds: dec15)
    }

    /// `limits.maxTrackedIdentities` bounds the memory backend's budget keys (issue 18 §5): addresses sprayed at an
    /// `auth: "none"` route cannot grow it past the bound.
    @Test func trackedIdentitiesAreBoundedByTheConfiguration() throws {
        var configuration = RelayConfiguration()
        configuration.budgets = BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000))
        configuration.limits.maxTrackedIdentities = 100
        let store = MemoryAdmissionStore(configuration: configuration, wallClock: { Double(Self.dec15) })
        for i in 0..<1_000 {
            let request = AdmissionRequest(address: "198.51.100.\(i % 250)", identity: nil,
                                           budget: BudgetCharge(key: "addr-\(i)", tokens: 10), wallClockSeconds: Self.dec15)
            guard case .admitted(let grant) = store.admit(request, now: Instant(nanoseconds: 0)) else {
                Issue.record("refused")
                return
            }
            store.settle(grant, usedTokens: 10)
        }
        #expect(store.trackedBudgetKeys == (tracked: 100, evicted: 900))
        #expect(RelayConfiguration().limits.maxTrackedIdentities == 100_000)
    }

    @Test func streamCapsHoldUntilSettledAndSettlingTwiceIsHarmless() {
        let store = Self.store(perIdentity: RateLimits(requestsPerMinute: nil, maxConcurrentStreams: 2))
        let now = Instant(nanoseconds: 0)
        guard case .admitted(let a) = store.admit(Self.request(), now: now),
              case .admitted = store.admit(Self.request(), now: now) else { Issue.record("refused"); return }
        #expect(store.admit(Self.request(), now: now) == .refused(.concurrency(retryAfterSeconds: 1)))
        #expect(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).openStreams == 2)
        store.settle(a, usedTokens: 0)
        store.settle(a, usedTokens: 0)
        #expect(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).openStreams == 1)
        guard case .admitted = store.admit(Self.request(), now: now) else { Issue.record("refused after a settle"); return }
        #expect(store.admit(Self.request(), now: now) == .refused(.concurrency(retryAfterSeconds: 1)), "a double settle freed a slot")
    }

    @Test func aBudgetRefusalTakesNoBucketTokenAndNoLease() {
        let store = Self.store(perAddress: RateLimits(requestsPerMinute: 60, burst: 1, maxConcurrentStreams: 1),
                               budgets: BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1000)))
        let now = Instant(nanoseconds: 0)
        #expect(store.admit(Self.request(tokens: 1001), now: now) == .refused(.budget(retryAfterSeconds: 14 * 3600)))
        guard case .admitted(let grant) = store.admit(Self.request(tokens: 1000), now: now) else {
            Issue.record("the budget refusal took the only bucket token or stream slot"); return
        }
        #expect(grant.reservedTokens == 1000)
        #expect(store.openGrants == 1)
    }

    @Test func aRateRefusalHoldsNoReservation() {
        let store = Self.store(perIdentity: RateLimits(requestsPerMinute: 60, burst: 1),
                               budgets: BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1000)))
        let now = Instant(nanoseconds: 0)
        guard case .admitted(let first) = store.admit(Self.request(tokens: 100), now: now) else { Issue.record("refused"); return }
        #expect(store.admit(Self.request(tokens: 100), now: now) == .refused(.rate(retryAfterSeconds: 1)))
        store.settle(first, usedTokens: 40)
        let day = store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[0]
        #expect(day.usedTokens == 40 && day.reservedTokens == 0)
    }

    @Test func extendAndSettleGoThroughTheLedger() {
        let store = Self.store(budgets: BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 10_000)))
        guard case .admitted(let grant) = store.admit(Self.request(tokens: 4096), now: Instant(nanoseconds: 0)) else { Issue.record("refused"); return }
        #expect(store.extend(grant, byTokens: 4096))
        #expect(!store.extend(grant, byTokens: 4096))
        #expect(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[0].reservedTokens == 8192)
        store.settle(grant, usedTokens: 5000)
        #expect(!store.extend(grant, byTokens: 1), "a settled grant grows no more")
        let day = store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[0]
        #expect(day.usedTokens == 5000 && day.reservedTokens == 0)
    }

    @Test func theProtocolCallsCompleteAtOnceOnTheCallersQueue() {
        let store = Self.store()
        let loop = EventLoop(index: 0, clock: ManualClock())
        let answered = Locked(0)
        loop.queue.sync {
            store.admit(Self.request(), on: loop) { decision in
                if case .admitted(let grant) = decision { store.settle(grant, usedTokens: 0) }
                answered.withLock { $0 += 1 }
            }
            #expect(answered.withLock { $0 } == 1)
        }
        #expect(store.openGrants == 0)
    }
}
