import Usage

/// Keeps a stream's budget reservation ahead of its output, as a value: counted output in, `extend` or `cut` out.
/// Every event stream on a route with budgets has one. A stream whose request named no ceiling reserved the route's
/// limit or `budgets.defaultReserveTokens`, and is guarded from there. One whose request named its own ceiling is
/// trusted to stop at it, with an `allowance` on top: the count is an estimate (text bytes ÷ 4 can run ahead of the
/// tokens), so only output past twice its reservation and one more step (a provider that reads the ceiling
/// otherwise than the relay, or a reasoning model whose ceiling leaves its reasoning out) brings the guard in.
///
/// When less than a fifth of a step (`defaultReserveTokens`) of the output reservation is left (with the
/// default 4096: at 80 % of the first step, 3 277 tokens counted), it asks for one more step. One extension is in
/// flight at a time; bytes keep flowing meanwhile. If the budgets refuse it, `onExceed: cut` ends the stream (the
/// shell waits for an event boundary) and `finish` stops guarding and lets the stream run: it is charged at its end.
/// Owned by the exchange's loop queue, like the exchange.
package struct BudgetGuard: Sendable, Equatable {
    package enum Action: Sendable, Equatable {
        case none
        /// Ask the store for `tokens` more.
        case extend(tokens: Int)
        /// The budget is exhausted: end the stream at the next event boundary.
        case cut
    }

    package enum State: Sendable, Equatable {
        case guarding
        case extending
        /// Refused with `cut`: the stream ends.
        case exhausted
        /// Refused with `finish`: nothing more to do.
        case stopped
    }

    package let step: Int
    package let onExceed: BudgetConfiguration.OnExceed
    /// The part of the reservation that stands for the prompt (its estimate).
    package let promptTokens: Int
    /// Counted output beyond the reservation that asks for nothing yet: 0, or for a stream whose request named its
    /// ceiling, its reserved output and one step (`init(reservedTokens:promptTokens:step:onExceed:namedCeiling:)`).
    package let allowance: Int
    private(set) var reservedTokens: Int
    package private(set) var state = State.guarding

    package init(reservedTokens: Int, promptTokens: Int, step: Int, onExceed: BudgetConfiguration.OnExceed,
                 namedCeiling: Bool = false) {
        self.reservedTokens = reservedTokens
        self.promptTokens = promptTokens
        self.step = max(step, 1)
        self.onExceed = onExceed
        allowance = namedCeiling ? max(reservedTokens - promptTokens, 0) + max(step, 1) : 0
    }

    /// The counted output at which the next extension is asked for.
    package var threshold: Int { reservedTokens - promptTokens - step / 5 + allowance }

    /// The stream's output so far, in tokens (`UsageTap.estimatedOutputTokens`: the larger of the content events
    /// and the content text's bytes / 4).
    package mutating func counted(output: Int) -> Action {
        guard state == .guarding, output >= threshold else { return .none }
        state = .extending
        return .extend(tokens: step)
    }

    /// The store answered the extension in flight.
    package mutating func extensionAnswered(granted: Bool, output: Int) -> Action {
        guard state == .extending else { return .none }
        if granted {
            reservedTokens += step
            state = .guarding
            return counted(output: output)   // output may have outrun the new step already
        }
        switch onExceed {
        case .cut:
            state = .exhausted
            return .cut
        case .finish:
            state = .stopped
            return .none
        }
    }

    /// The one event that ends a cut stream, in the provider's error shape, which its official SDKs raise as an
    /// error: OpenAI's and Azure's raise on a data event whose JSON has an `error` member (no `[DONE]` follows:
    /// the answer is not complete and must not look it), Anthropic's on `event: error`, Gemini's on an `error`
    /// object with Google's `code`/`status`.
    package static func closingEvent(provider: Provider) -> [UInt8] {
        let message = "The token budget is used up; the answer was cut short."
        switch provider {
        case .openai, .azureOpenAI:
            return Array(#"data: {"error":{"message":"\#(message)","type":"budget_exhausted","code":"budget_exhausted"}}"#.utf8) + [0x0A, 0x0A]
        case .anthropic:
            return Array("event: error\n".utf8)
                + Array(#"data: {"type":"error","error":{"type":"budget_exhausted","message":"\#(message)"}}"#.utf8) + [0x0A, 0x0A]
        case .gemini:
            return Array(#"data: {"error":{"code":429,"message":"\#(message)","status":"RESOURCE_EXHAUSTED"}}"#.utf8) + [0x0A, 0x0A]
        }
    }
}
