// What an admission asks and answers, as values: the stores (RelayState) and the exchange (Relay) both speak them.

/// An amount a budget counts: tokens and nano-dollars (10⁻⁹ US dollar, `Cost`), both whole numbers.
package struct BudgetAmount: Sendable, Equatable {
    package var tokens: Int
    package var nanoUSD: Int

    package init(tokens: Int, nanoUSD: Int = 0) {
        self.tokens = tokens
        self.nanoUSD = nanoUSD
    }
}

/// What one admission asks for. Keys are the relay's own (an authenticated identity, a client address); the
/// store adds its prefix.
package struct AdmissionRequest: Sendable, Equatable {
    /// The client's address: the per-address bucket and stream cap.
    package var address: String
    /// The authenticated identity, nil on `auth: "none"` routes: the per-identity bucket and stream cap.
    package var identity: String?
    /// The budget to reserve against, nil when no budgets are configured.
    package var budget: BudgetCharge?
    /// Unix time in seconds: the budgets' UTC day and month.
    package var wallClockSeconds: Int64

    package init(address: String, identity: String?, budget: BudgetCharge?, wallClockSeconds: Int64) {
        self.address = address
        self.identity = identity
        self.budget = budget
        self.wallClockSeconds = wallClockSeconds
    }
}

/// A reservation against one budget key (the identity, or the client address on `auth: "none"` routes) and the
/// total budget.
package struct BudgetCharge: Sendable, Equatable {
    package var key: String
    /// The request's ceiling plus its prompt estimate.
    package var tokens: Int
    /// The same priced (`Cost.reservation`), in nano-dollars; 0 when the model has no price (only allowed without
    /// dollar limits: with them such a request is refused 403 `model_not_priced` before it gets here).
    package var nanoUSD: Int

    package init(key: String, tokens: Int, nanoUSD: Int = 0) {
        self.key = key
        self.tokens = tokens
        self.nanoUSD = nanoUSD
    }
}

/// The store's answer.
package enum AdmissionDecision: Sendable, Equatable {
    case admitted(AdmissionGrant)
    case refused(AdmissionRefusal)
}

/// Why an admission was refused, with what the client is told.
package enum AdmissionRefusal: Sendable, Equatable {
    /// A token bucket is empty (429 `rate_limited`).
    case rate(retryAfterSeconds: Int)
    /// A stream cap is reached (429 `concurrency_limited`).
    case concurrency(retryAfterSeconds: Int)
    /// A budget cannot cover the reservation (429 `budget_exhausted`, Retry-After to the window's reset).
    case budget(retryAfterSeconds: Int)
    /// The shared store did not answer in time and `onUnavailable` is `reject` (503 `state_unavailable`).
    case unavailable
}

/// What an admitted request holds until it settles. The store keeps the details (leases, reservation ids) behind
/// `id`; the exchange only carries it back.
package struct AdmissionGrant: Sendable, Hashable {
    /// Unique per store instance.
    package let id: UInt64
    /// Tokens reserved so far (the admission's plus every extension).
    package var reservedTokens: Int
    /// How the store decided: normally, or degraded because the shared store was unavailable.
    package var mode: Mode

    package enum Mode: Sendable, Hashable {
        /// Decided by the configured store.
        case shared
        /// Redis did not answer; `onUnavailable: allow` admitted it without limits.
        case allowedUnavailable
        /// Redis did not answer; `onUnavailable: local` decided it on this replica's memory limits.
        case local
    }

    package init(id: UInt64, reservedTokens: Int, mode: Mode = .shared) {
        self.id = id
        self.reservedTokens = reservedTokens
        self.mode = mode
    }
}

/// One identity's spend in the current windows (`GET /usage`).
package struct BudgetReport: Sendable, Equatable {
    package struct Window: Sendable, Equatable {
        /// `day` or `month`.
        package var name: String
        /// The window's start, e.g. `2026-12-01` or `2026-12`.
        package var period: String
        package var usedTokens: Int
        package var reservedTokens: Int
        /// The configured limit, nil when this window has none.
        package var limitTokens: Int?
        /// Seconds until the window resets.
        package var resetsInSeconds: Int
        /// The same in nano-dollars (`Cost`); the limit nil when this window has no dollar limit.
        package var usedNanoUSD = 0
        package var reservedNanoUSD = 0
        package var limitNanoUSD: Int?

        package init(name: String, period: String, usedTokens: Int, reservedTokens: Int, limitTokens: Int?, resetsInSeconds: Int) {
            self.name = name
            self.period = period
            self.usedTokens = usedTokens
            self.reservedTokens = reservedTokens
            self.limitTokens = limitTokens
            self.resetsInSeconds = resetsInSeconds
        }
    }

    package var identity: String
    package var windows: [Window]
    /// Streams the identity has open (all replicas with Redis).
    package var openStreams: Int

    package init(identity: String, windows: [Window], openStreams: Int) {
        self.identity = identity
        self.windows = windows
        self.openStreams = openStreams
    }
}
