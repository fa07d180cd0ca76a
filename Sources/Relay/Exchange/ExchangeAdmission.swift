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
    /// `max_completion_tokens` (the larger, when both), else the route's limit, else `defaultReserveTokens`; plus
    /// the prompt estimate. A bodyless request (a GET) generates nothing and reserves nothing.
    func reservation(forwardedBody body: [UInt8]?, provider: Provider) -> Reservation {
        guard let budgets, budgetKey != nil else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        guard let body else { return Reservation(tokens: 0, promptTokens: 0, hasCeiling: true) }
        let ceiling = Self.requestCeiling(body)
        let prompt = PromptEstimate.tokens(requestBody: body, provider: provider) ?? 0
        let output = ceiling ?? routeMaxTokens ?? budgets.defaultReserveTokens
        return Reservation(tokens: output + prompt, promptTokens: prompt, hasCeiling: ceiling != nil)
    }

    /// The top-level `max_tokens` / `max_completion_tokens` integer (the larger when both); nil when absent,
    /// `null`, or not a JSON object.
    static func requestCeiling(_ body: [UInt8]) -> Int? {
        guard let members = try? JSONTopLevel.scan(body) else { return nil }
        var ceiling: Int?
        for member in members where member.kind == .number && BodyPolicy.maxTokensKeys.contains(where: { member.hasKey($0) }) {
            switch JSONTopLevel.integer(in: body, at: member.valueRange) {
            case .value(let n) where n >= 0: ceiling = max(ceiling ?? 0, n)
            case .outOfRange(negative: false): ceiling = Int.max / 4
            default: break
            }
        }
        return ceiling
    }
}
