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
        /// The request named its own ceiling (`OutputCeiling`): no guard needed, nothing written.
        var hasCeiling: Bool
        /// The ceiling reserved per choice: the request's, else the route's limit, else `defaultReserveTokens`.
        var outputCeiling = 0
        /// A ceiling or choices field given twice: the request is refused (400 `duplicate_key`).
        var duplicatedKey: String?

        /// The least output charged to a stream that ended without the provider's counts (`budgets.
        /// cancelFloorTokensPerSecond`): `tokensPerSecond` for every second since the provider's response head
        /// (rounded up), capped by the output this request reserved, `reservedTokens` (the grant's, extensions
        /// included) less the prompt part. The time a reasoning model spends silent is billed, and visible text
        /// alone cannot show it; the cap keeps the charge within what the admission already set aside.
        func outputFloor(secondsSinceHead: Double, tokensPerSecond: Int, reservedTokens: Int) -> Int {
            let cap = max(0, reservedTokens - promptTokens)
            guard secondsSinceHead > 0, tokensPerSecond > 0, cap > 0 else { return 0 }
            let floor = (secondsSinceHead * Double(tokensPerSecond)).rounded(.up)
            return floor >= Double(cap) ? cap : Int(floor)
        }
    }

    /// The reservation for a request to `path` whose forwarded body (after any clamp) is `body`: its ceiling as the
    /// endpoint reads it (`OutputCeiling`: `max_tokens` / `max_completion_tokens`, the larger; the Responses API's
    /// `max_output_tokens`; Gemini's `generationConfig.maxOutputTokens`), else the route's limit, else
    /// `defaultReserveTokens`; times the choices it asks for (OpenAI's `n`, Gemini's `candidateCount`: each choice
    /// may reach the ceiling and all are billed); plus the prompt estimate. A bodyless request (a GET) generates
    /// nothing and reserves nothing. Saturates at `maxReservation`: the numbers come from the client, and no budget
    /// can hold that much anyway.
    func reservation(forwardedBody body: [UInt8]?, provider: Provider, path: String) -> Reservation {
        guard let budgets, budgetKey != nil else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        guard let body else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        let named = OutputCeiling(provider: provider, path: path).named(in: body) { Self.count(in: body, at: $0) }
        let prompt = min(PromptEstimate.tokens(requestBody: body, provider: provider) ?? 0, Self.maxReservation)
        let perChoice = min(named.ceiling ?? routeMaxTokens ?? budgets.defaultReserveTokens, Self.maxReservation)
        let (output, overflow) = perChoice.multipliedReportingOverflow(by: named.choices)
        let saturated = overflow ? Self.maxReservation : min(output, Self.maxReservation)
        return Reservation(tokens: saturated + prompt, promptTokens: prompt, hasCeiling: named.ceiling != nil,
                           outputCeiling: perChoice, duplicatedKey: named.duplicatedKey)
    }

    /// The most one request reserves for its output, or for its prompt: far above any budget (so refused), and
    /// small enough that sums and extensions stay far from `Int.max` (and exact enough for Redis's Lua doubles).
    static let maxReservation = Int.max / 4

    /// A non-negative count, saturated at `maxReservation`; nil when negative or not a number. A number written as
    /// a fraction or with an exponent (`8.0`, `1e3`) counts rounded up, as a lenient provider would read it.
    static func count(in body: [UInt8], at range: Range<Int>) -> Int? {
        switch JSONTopLevel.integer(in: body, at: range) {
        case .value(let n): return n >= 0 ? min(n, maxReservation) : nil
        case .outOfRange(negative: let negative): return negative ? nil : maxReservation
        case .notAnInteger:
            guard let d = Double(String(decoding: body[range], as: UTF8.self)), d >= 0, !d.isNaN else { return nil }
            return d >= Double(maxReservation) ? maxReservation : Int(d.rounded(.up))
        }
    }
}
