// BudgetGuard as a value: when a stream asks for more budget and when it is cut (where events end:
// SSEBoundaryScannerTests).
import HTTP1
@testable import Relay
@testable import RelayCore
@testable import RelayState
import RelayDev
import Testing
import Usage

@Suite struct BudgetGuardTests {
    @Test func asksForOneStepAtEightyPercentAndOnlyOneAtATime() {
        var g = BudgetGuard(reservedTokens: 4096 + 100, promptTokens: 100, step: 4096, onExceed: .cut)
        #expect(g.threshold == 3277)
        #expect(g.counted(output: 3276) == .none)
        #expect(g.counted(output: 3277) == .extend(tokens: 4096))
        #expect(g.counted(output: 3500) == .none, "a second extension while one is in flight")
        #expect(g.extensionAnswered(granted: true, output: 3600) == .none)
        #expect(g.reservedTokens == 8192 + 100)
        #expect(g.counted(output: 7372) == .none)
        #expect(g.counted(output: 7373) == .extend(tokens: 4096))
    }

    /// A request that named its ceiling is trusted to its reserved output twice over and one step more: the count
    /// is an estimate, and only a provider that does not keep the ceiling gets there.
    @Test func aNamedCeilingIsTrustedToTwiceItsReservationAndOneStep() {
        var g = BudgetGuard(reservedTokens: 100 + 20, promptTokens: 20, step: 50, onExceed: .cut, namedCeiling: true)
        #expect(g.allowance == 150)
        #expect(g.threshold == 100 - 10 + 150)
        #expect(g.counted(output: 100) == .none, "the ceiling itself")
        #expect(g.counted(output: 239) == .none)
        #expect(g.counted(output: 240) == .extend(tokens: 50))
        #expect(g.extensionAnswered(granted: false, output: 240) == .cut)
        #expect(BudgetGuard(reservedTokens: 120, promptTokens: 20, step: 50, onExceed: .cut).allowance == 0)
    }

    @Test func anOutputThatOutranTheStepAsksAgainAtOnce() {
        var g = BudgetGuard(reservedTokens: 4096, promptTokens: 0, step: 4096, onExceed: .cut)
        #expect(g.counted(output: 3300) == .extend(tokens: 4096))
        #expect(g.extensionAnswered(granted: true, output: 7500) == .extend(tokens: 4096))
    }

    @Test func aRefusalCutsOrLetsTheStreamFinish() {
        var cut = BudgetGuard(reservedTokens: 4096, promptTokens: 0, step: 4096, onExceed: .cut)
        _ = cut.counted(output: 4000)
        #expect(cut.extensionAnswered(granted: false, output: 4000) == .cut)
        #expect(cut.counted(output: 9000) == .none)
        var finish = BudgetGuard(reservedTokens: 4096, promptTokens: 0, step: 4096, onExceed: .finish)
        _ = finish.counted(output: 4000)
        #expect(finish.extensionAnswered(granted: false, output: 4000) == .none)
        #expect(finish.state == .stopped)
        #expect(finish.counted(output: 90_000) == .none)
    }

    @Test func closingEventsHaveEachProvidersErrorShape() {
        let message = "The token budget is used up; the answer was cut short."
        #expect(String(decoding: BudgetGuard.closingEvent(provider: .openai), as: UTF8.self)
                == "data: {\"error\":{\"message\":\"\(message)\",\"type\":\"budget_exhausted\",\"code\":\"budget_exhausted\"}}\n\n")
        #expect(BudgetGuard.closingEvent(provider: .azureOpenAI) == BudgetGuard.closingEvent(provider: .openai))
        #expect(String(decoding: BudgetGuard.closingEvent(provider: .anthropic), as: UTF8.self)
                == "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"budget_exhausted\",\"message\":\"\(message)\"}}\n\n")
        #expect(String(decoding: BudgetGuard.closingEvent(provider: .gemini), as: UTF8.self)
                == "data: {\"error\":{\"code\":429,\"message\":\"\(message)\",\"status\":\"RESOURCE_EXHAUSTED\"}}\n\n")
    }
}
