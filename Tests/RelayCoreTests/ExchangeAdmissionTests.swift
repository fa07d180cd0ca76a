// The reservation a request asks for: what a client can write in its body must never crash the relay or buy
// more output than it reserves.
@testable import Relay
import Testing
import Usage

@Suite struct ExchangeAdmissionTests {
    static func admission(routeMaxTokens: Int? = nil) -> ExchangeAdmission {
        ExchangeAdmission(store: FakeAdmissionStore(), address: "198.51.100.7", identity: "app", budgetKey: "app",
                          budgets: BudgetConfiguration(perIdentity: BudgetLimits(tokensPerDay: 1_000_000), onExceed: .cut,
                                                       defaultReserveTokens: 10),
                          routeMaxTokens: routeMaxTokens, wallClock: { 1_797_328_800 })
    }

    static func body(_ members: String) -> [UInt8] {
        Array(#"{"model":"gpt-4o",\#(members),"messages":[{"role":"user","content":"How are you today?"}]}"#.utf8)
    }

    /// `max_tokens` at Int.max plus the prompt estimate once trapped on overflow: one request from any client
    /// took the whole relay down (every stream of every user with it).
    @Test(arguments: ["9223372036854775807", "9223372036854775806", "99999999999999999999"])
    func aHugeCeilingSaturatesInsteadOfTrapping(_ ceiling: String) {
        let r = Self.admission().reservation(forwardedBody: Self.body(#""max_tokens":\#(ceiling)"#), provider: .openai)
        #expect(r.hasCeiling)
        #expect(r.tokens >= Int.max / 4, "still refused by any budget")
        #expect(r.tokens <= Int.max / 2, "with room left for extensions and sums")
    }

    /// OpenAI's `n` asks for n choices, each up to the ceiling, and bills them all: the reservation covers n of them.
    @Test func nChoicesReserveNTimesTheCeiling() {
        let one = Self.admission().reservation(forwardedBody: Self.body(#""max_tokens":100"#), provider: .openai)
        let eight = Self.admission().reservation(forwardedBody: Self.body(#""max_tokens":100,"n":8"#), provider: .openai)
        #expect(eight.tokens - eight.promptTokens == 8 * (one.tokens - one.promptTokens))
        #expect(eight.hasCeiling)
        let noCeiling = Self.admission(routeMaxTokens: 50).reservation(forwardedBody: Self.body(#""n":4"#), provider: .openai)
        #expect(noCeiling.tokens - noCeiling.promptTokens == 4 * 50, "the route's limit is per choice too")
        let huge = Self.admission().reservation(forwardedBody: Self.body(#""max_tokens":4611686018427387903,"n":128"#), provider: .openai)
        #expect(huge.tokens >= Int.max / 4 && huge.tokens <= Int.max / 2)
    }
}
