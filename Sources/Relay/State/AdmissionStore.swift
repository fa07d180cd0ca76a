import Support
import Transport

/// Where the relay keeps what several replicas must agree on: the per-identity and per-address token buckets,
/// the concurrent-stream counts, and the token budgets. `MemoryAdmissionStore` keeps them in this process
/// (one replica, `make run`, the tests); `RedisAdmissionStore` keeps them in Redis, so every replica sees the
/// same numbers (README, "Running several replicas").
///
/// One admission is one decision: the buckets, the concurrency leases and the budget reservation are taken
/// together or not at all, so a refusal never leaves a lease or a reservation behind. The exchange asks once its
/// request is whole (the reservation needs the body's `max_tokens` and prompt), grows the reservation while a
/// stream without a ceiling runs (`extend`), and settles at its end with what the stream really cost.
///
/// Completions run on the caller's loop queue, possibly before the call returns (the memory store answers at
/// once); callers must not assume either.
public protocol AdmissionStore: AnyObject, Sendable {
    /// Takes the request's bucket tokens, concurrency leases and budget reservation, or refuses them all.
    func admit(_ request: AdmissionRequest, on loop: EventLoop, _ completion: @escaping @Sendable (AdmissionDecision) -> Void)

    /// Grows a running stream's reservation by `tokens` (one atomic step, like the admission). `true` when the
    /// budgets cover it; `false` when they do not (the stream is cut or finishes, per `budgets.onExceed`). A store
    /// that cannot answer (Redis down) answers as its `onUnavailable` says, never by cutting a running stream.
    func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: EventLoop, _ completion: @escaping @Sendable (Bool) -> Void)

    /// The exchange ended: its leases are released and its reservation settled at `usedTokens` (the rest is
    /// released). Fire and forget; exactly once per grant.
    func settle(_ grant: AdmissionGrant, usedTokens: Int)

    /// `extend` in tokens and nano-dollars at once: both grow, or neither (dollar budgets, issue 23).
    func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: EventLoop, _ completion: @escaping @Sendable (Bool) -> Void)

    /// `settle` with the tokens and the nano-dollars really spent.
    func settle(_ grant: AdmissionGrant, used amount: BudgetAmount)

    /// An identity's spend for ops (`GET /usage?identity=` on the admin listener): counters and reservations of
    /// the current windows, or nil when the store cannot answer.
    func usageReport(identity: String, wallClockSeconds: Int64, on loop: EventLoop,
                     _ completion: @escaping @Sendable (BudgetReport?) -> Void)

    /// The server stopped, after its exchanges ended (their settles are queued ahead of this): stop background
    /// work and close connections. Called once, by `RelayServer.shutdown()`; a store with nothing running keeps
    /// the default, which does nothing.
    func shutdown()
}

extension AdmissionStore {
    public func shutdown() {}
}

/// A store that keeps no dollars (a test double) grows and settles the tokens only.
extension AdmissionStore {
    public func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: EventLoop, _ completion: @escaping @Sendable (Bool) -> Void) {
        extend(grant, byTokens: amount.tokens, on: loop, completion)
    }

    public func settle(_ grant: AdmissionGrant, used amount: BudgetAmount) {
        settle(grant, usedTokens: amount.tokens)
    }
}

/// An amount a budget counts: tokens and nano-dollars (10⁻⁹ US dollar, `Cost`), both whole numbers.
public struct BudgetAmount: Sendable, Equatable {
    public var tokens: Int
    public var nanoUSD: Int

    public init(tokens: Int, nanoUSD: Int = 0) {
        self.tokens = tokens
        self.nanoUSD = nanoUSD
    }
}

/// What one admission asks for. Keys are the relay's own (an authenticated identity, a client address); the
/// store adds its prefix.
public struct AdmissionRequest: Sendable, Equatable {
    /// The client's address: the per-address bucket and stream cap.
    public var address: String
    /// The authenticated identity, nil on `auth: "none"` routes: the per-identity bucket and stream cap.
    public var identity: String?
    /// The budget to reserve against, nil when no budgets are configured.
    public var budget: BudgetCharge?
    /// Unix time in seconds: the budgets' UTC day and month.
    public var wallClockSeconds: Int64

    public init(address: String, identity: String?, budget: BudgetCharge?, wallClockSeconds: Int64) {
        self.address = address
        self.identity = identity
        self.budget = budget
        self.wallClockSeconds = wallClockSeconds
    }
}

/// A reservation against one budget key (the identity, or the client address on `auth: "none"` routes) and the
/// total budget.
public struct BudgetCharge: Sendable, Equatable {
    public var key: String
    /// The request's ceiling plus its prompt estimate.
    public var tokens: Int
    /// The same priced (`Cost.reservation`), in nano-dollars; 0 when the model has no price (only allowed without
    /// dollar limits: with them such a request is refused 403 `model_not_priced` before it gets here).
    public var nanoUSD: Int

    public init(key: String, tokens: Int, nanoUSD: Int = 0) {
        self.key = key
        self.tokens = tokens
        self.nanoUSD = nanoUSD
    }
}

/// The store's answer.
public enum AdmissionDecision: Sendable, Equatable {
    case admitted(AdmissionGrant)
    case refused(AdmissionRefusal)
}

/// Why an admission was refused, with what the client is told.
public enum AdmissionRefusal: Sendable, Equatable {
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
public struct AdmissionGrant: Sendable, Hashable {
    /// Unique per store instance.
    public let id: UInt64
    /// Tokens reserved so far (the admission's plus every extension).
    public var reservedTokens: Int
    /// How the store decided: normally, or degraded because the shared store was unavailable.
    public var mode: Mode

    public enum Mode: Sendable, Hashable {
        /// Decided by the configured store.
        case shared
        /// Redis did not answer; `onUnavailable: allow` admitted it without limits.
        case allowedUnavailable
        /// Redis did not answer; `onUnavailable: local` decided it on this replica's memory limits.
        case local
    }

    public init(id: UInt64, reservedTokens: Int, mode: Mode = .shared) {
        self.id = id
        self.reservedTokens = reservedTokens
        self.mode = mode
    }
}

/// One identity's spend in the current windows (`GET /usage`).
public struct BudgetReport: Sendable, Equatable {
    public struct Window: Sendable, Equatable {
        /// `day` or `month`.
        public var name: String
        /// The window's start, e.g. `2026-12-01` or `2026-12`.
        public var period: String
        public var usedTokens: Int
        public var reservedTokens: Int
        /// The configured limit, nil when this window has none.
        public var limitTokens: Int?
        /// Seconds until the window resets.
        public var resetsInSeconds: Int
        /// The same in nano-dollars (`Cost`); the limit nil when this window has no dollar limit.
        public var usedNanoUSD = 0
        public var reservedNanoUSD = 0
        public var limitNanoUSD: Int?

        public init(name: String, period: String, usedTokens: Int, reservedTokens: Int, limitTokens: Int?, resetsInSeconds: Int) {
            self.name = name
            self.period = period
            self.usedTokens = usedTokens
            self.reservedTokens = reservedTokens
            self.limitTokens = limitTokens
            self.resetsInSeconds = resetsInSeconds
        }
    }

    public var identity: String
    public var windows: [Window]
    /// Streams the identity has open (all replicas with Redis).
    public var openStreams: Int

    public init(identity: String, windows: [Window], openStreams: Int) {
        self.identity = identity
        self.windows = windows
        self.openStreams = openStreams
    }
}
