import Usage

/// What an exchange needs to ask the admission store once its request is whole: the store, the keys, the
/// budgets and how to size the reservation. Built per request by `RelayHandler`; a plain value.
struct ExchangeAdmission: Sendable {
    var store: any AdmissionStore
    /// The per-address bucket's key.
    var address: String
    /// The authenticated identity (nil on `auth: "none"` routes).
    var identity: String?
    /// The budget's key (the identity, or the address on `auth: "none"` routes); nil without budgets.
    var budgetKey: String?
    var budgets: BudgetConfiguration?
    /// The route's `maxTokens.limit`: the ceiling of a request that names none.
    var routeMaxTokens: Int?
    /// Unix seconds: the budgets' UTC windows.
    var wallClock: @Sendable () -> Double

    /// What one request reserves.
    struct Reservation: Sendable, Equatable {
        /// Ceiling plus prompt estimate.
        var tokens: Int
        var promptTokens: Int
        /// The request named its own ceiling (`max_tokens` or `max_completion_tokens`): no guard needed.
        var hasCeiling: Bool
    }

    /// The reservation for a request whose forwarded body (after any clamp) is `body`: its `max_tokens` /
    /// `max_completion_tokens` (the larger, when both), else the route's limit, else `defaultReserveTokens`; times
    /// the choices it asks for (OpenAI's `n`: each choice may reach the ceiling and all are billed); plus the prompt
    /// estimate. A bodyless request (a GET) generates nothing and reserves nothing. Saturates at `maxReservation`:
    /// the numbers come from the client, and no budget can hold that much anyway.
    func reservation(forwardedBody body: [UInt8]?, provider: Provider) -> Reservation {
        guard let budgets, budgetKey != nil else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        guard let body else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        let (ceiling, choices) = Self.requestCeiling(body)
        let prompt = min(PromptEstimate.tokens(requestBody: body, provider: provider) ?? 0, Self.maxReservation)
        let perChoice = min(ceiling ?? routeMaxTokens ?? budgets.defaultReserveTokens, Self.maxReservation)
        let (output, overflow) = perChoice.multipliedReportingOverflow(by: choices)
        let saturated = overflow ? Self.maxReservation : min(output, Self.maxReservation)
        return Reservation(tokens: saturated + prompt, promptTokens: prompt, hasCeiling: ceiling != nil)
    }

    /// The most one request reserves for its output, or for its prompt: far above any budget (so refused), and
    /// small enough that sums and extensions stay far from `Int.max` (and exact enough for Redis's Lua doubles).
    static let maxReservation = Int.max / 4

    /// The top-level `max_tokens` / `max_completion_tokens` integer (the larger when both; nil when absent, `null`,
    /// or not a JSON object), and the choices asked for: the top-level `n` (the largest when repeated; at least 1).
    /// A number written as a fraction or with an exponent (`8.0`, `1e3`) counts rounded up, as a lenient provider
    /// would read it.
    static func requestCeiling(_ body: [UInt8]) -> (ceiling: Int?, choices: Int) {
        guard let members = try? JSONTopLevel.scan(body) else { return (nil, 1) }
        var ceiling: Int?
        var choices = 1
        for member in members where member.kind == .number {
            let isCeiling = BodyPolicy.maxTokensKeys.contains(where: { member.hasKey($0) })
            guard isCeiling || member.hasKey("n"), let n = count(in: body, at: member.valueRange) else { continue }
            if isCeiling { ceiling = max(ceiling ?? 0, n) } else { choices = max(choices, n) }
        }
        return (ceiling, choices)
    }

    /// A non-negative count, saturated at `maxReservation`; nil when negative or not a number.
    private static func count(in body: [UInt8], at range: Range<Int>) -> Int? {
        switch JSONTopLevel.integer(in: body, at: range) {
        case .value(let n): return n >= 0 ? min(n, maxReservation) : nil
        case .outOfRange(negative: let negative): return negative ? nil : maxReservation
        case .notAnInteger:
            guard let d = Double(String(decoding: body[range], as: UTF8.self)), d >= 0, !d.isNaN else { return nil }
            return d >= Double(maxReservation) ? maxReservation : Int(d.rounded(.up))
        }
    }
}
