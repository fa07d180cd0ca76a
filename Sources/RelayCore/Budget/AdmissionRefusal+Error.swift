extension AdmissionRefusal {
    /// What the client is told.
    package var error: RelayError {
        switch self {
        case .rate(let seconds): .rateLimited(retryAfterSeconds: seconds)
        case .concurrency(let seconds): .concurrencyLimited(retryAfterSeconds: seconds)
        case .budget(let seconds): .budgetExhausted(retryAfterSeconds: seconds)
        case .unavailable: .stateUnavailable
        }
    }

    /// The rejection's metric reason and log word.
    package var reason: String {
        switch self {
        case .rate: "rate_limited"
        case .concurrency: "concurrency_limited"
        case .budget: "budget_exhausted"
        case .unavailable: "state_unavailable"
        }
    }
}

extension RelayError {
    /// 429 `budget_exhausted`: the identity's (or the app's total) token budget cannot cover the request;
    /// `Retry-After` counts to the reset of the window that refused (UTC midnight, or the month's first day).
    package static func budgetExhausted(retryAfterSeconds: Int) -> RelayError {
        RelayError(status: 429, type: "budget_exhausted", code: "budget_exhausted",
                   message: "The token budget is used up; retry after the time in Retry-After, when the budget window resets.",
                   extraHeaders: [("Retry-After", String(retryAfterSeconds))])
    }

    /// 503 `state_unavailable`: the shared limits store (Redis) did not answer and `onUnavailable` is `reject`.
    package static let stateUnavailable = RelayError(
        status: 503, type: "server_error", code: "state_unavailable",
        message: "The relay cannot check its limits right now; retry shortly.",
        extraHeaders: [("Retry-After", "1")])
}
