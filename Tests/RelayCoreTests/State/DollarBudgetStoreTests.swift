// Dollar budgets in the memory store (issue 23): every limit must hold, tokens and dollars reserved, grown and
// settled together, in integer nano-dollars.
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Support
import Testing
import Transport
import Usage

@Suite struct DollarBudgetStoreTests {
    static let dec15 = Int64(1_797_328_800)   // 2026-12-15T10:00:00Z
    static let now = Instant(nanoseconds: 0)

    static func store(_ limits: BudgetLimits) -> MemoryAdmissionStore {
        MemoryAdmissionStore(rateLimits: RelayConfiguration.RateLimitSettings(), budgets: BudgetConfiguration(perIdentity: limits),
                             wallClock: { Double(dec15) })
    }

    static func request(tokens: Int, nanoUSD: Int) -> AdmissionRequest {
        AdmissionRequest(address: "192.0.2.1", identity: "app", budget: BudgetCharge(key: "app", tokens: tokens, nanoUSD: nanoUSD),
                         wallClockSeconds: dec15)
    }

    /// $0.01 a day with a generous token limit: the dollars refuse the third reservation of $0.004 though the
    /// tokens would hold it, with Retry-After to UTC midnight; the refusal reserves nothing.
    @Test func theDollarLimitRefusesWhenTheTokensWouldNot() throws {
        let store = Self.store(BudgetLimits(tokensPerDay: 1_000_000, nanoUSDPerDay: 10_000_000))
        guard case .admitted = store.admit(Self.request(tokens: 100, nanoUSD: 4_000_000), now: Self.now),
              case .admitted(let second) = store.admit(Self.request(tokens: 100, nanoUSD: 4_000_000), now: Self.now) else {
            Issue.record("refused below the limit")
            return
        }
        #expect(store.admit(Self.request(tokens: 100, nanoUSD: 4_000_000), now: Self.now) == .refused(.budget(retryAfterSeconds: 14 * 3600)))
        let day = try #require(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows.first)
        #expect(day.reservedNanoUSD == 8_000_000 && day.reservedTokens == 200, "the refusal took nothing")
        #expect(day.limitNanoUSD == 10_000_000)
        // Exactly at the limit is allowed: 8 000 000 + 2 000 000.
        guard case .admitted = store.admit(Self.request(tokens: 100, nanoUSD: 2_000_000), now: Self.now) else {
            Issue.record("refused at exactly the limit")
            return
        }
        store.settle(second, used: BudgetAmount(tokens: 10, nanoUSD: 1))
        #expect(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[0].usedNanoUSD == 1)
    }

    /// An extension grows tokens and dollars together: refused by the dollars, it grows neither.
    @Test func anExtensionGrowsBothOrNeither() {
        let store = Self.store(BudgetLimits(tokensPerDay: 1_000_000, nanoUSDPerMonth: 5_000))
        guard case .admitted(let grant) = store.admit(Self.request(tokens: 100, nanoUSD: 3_000), now: Self.now) else {
            Issue.record("refused")
            return
        }
        #expect(store.extend(grant, by: BudgetAmount(tokens: 50, nanoUSD: 2_000)))
        #expect(!store.extend(grant, by: BudgetAmount(tokens: 50, nanoUSD: 1)), "the month's dollars are spent")
        let month = store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[1]
        #expect(month.reservedTokens == 150 && month.reservedNanoUSD == 5_000, "the refused step took no tokens either")
        // Settled at the real cost: the reservation goes, the cost stays.
        store.settle(grant, used: BudgetAmount(tokens: 120, nanoUSD: 4_321))
        let settled = store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows[1]
        #expect(settled.usedNanoUSD == 4_321 && settled.reservedNanoUSD == 0 && settled.usedTokens == 120)
    }

    /// A token limit still holds beside a dollar limit: every limit given must hold.
    @Test func theTokenLimitStillHolds() {
        let store = Self.store(BudgetLimits(tokensPerDay: 150, nanoUSDPerDay: 1_000_000_000))
        guard case .admitted = store.admit(Self.request(tokens: 100, nanoUSD: 1), now: Self.now) else { Issue.record("refused"); return }
        #expect(store.admit(Self.request(tokens: 100, nanoUSD: 1), now: Self.now) == .refused(.budget(retryAfterSeconds: 14 * 3600)))
    }

    /// A `max_tokens` of 10¹⁸ at the highest price would cost more than `Int.max` nano-dollars: the charge is bounded
    /// at 2⁵² (exact in Redis's Lua numbers), still above the largest dollar limit, so it is refused, not wrapped.
    @Test func aHugeReservationIsBoundedAndStillRefused() {
        let price = ModelPrice(input: 100_000_000_000_000, output: 100_000_000_000_000)
        #expect(BudgetAmount.step(1_000_000_000_000_000_000, price: price, promptTokens: 0).nanoUSD == 1 << 52)
        #expect(BudgetAmount.settled(Usage(prompt: 1, completion: 0, source: .provider), cost: nil, admittedPrice: price).nanoUSD == 100_000_000)
        let store = Self.store(BudgetLimits(nanoUSDPerDay: 1_000_000_000_000_000))
        #expect(store.admit(Self.request(tokens: 1, nanoUSD: BudgetAmount.bounded(Int.max)), now: Self.now)
                == .refused(.budget(retryAfterSeconds: 14 * 3600)))
    }
    /// A budget in dollars only keeps no token limit, so nothing refuses a reservation of the most tokens a body
    /// can ask for (`max_tokens` far beyond any model, saturated) when the model's output is priced at 0: the token
    /// ledger still adds it up. Five such requests open together must neither overflow (a trap would end the
    /// process for every client) nor refuse the next one.
    @Test func reservationsAtTheCeilingNeverOverflowTheTokenLedger() throws {
        let store = Self.store(BudgetLimits(nanoUSDPerDay: 10_000_000))
        let most = RequestBodyPlan.maxReservation * 2   // the output ceiling and the prompt estimate, both saturated
        for _ in 0..<5 {
            guard case .admitted = store.admit(Self.request(tokens: most, nanoUSD: 10), now: Self.now) else {
                Issue.record("refused though the dollars hold it")
                return
            }
        }
        guard case .admitted = store.admit(Self.request(tokens: 100, nanoUSD: 10), now: Self.now) else {
            Issue.record("an ordinary request refused")
            return
        }
        let day = try #require(store.usageReport(identity: "app", wallClockSeconds: Self.dec15).windows.first)
        #expect(day.reservedTokens == 5 * most + 100)
    }
}
