import RelayCore
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
package protocol AdmissionStore: AnyObject, Sendable {
    /// Takes the request's bucket tokens, concurrency leases and budget reservation, or refuses them all.
    func admit(_ request: AdmissionRequest, on loop: any LoopScheduler, _ completion: @escaping @Sendable (AdmissionDecision) -> Void)

    /// Grows a running stream's reservation by `tokens` (one atomic step, like the admission). `true` when the
    /// budgets cover it; `false` when they do not (the stream is cut or finishes, per `budgets.onExceed`). A store
    /// that cannot answer (Redis down) answers as its `onUnavailable` says, never by cutting a running stream.
    func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void)

    /// The exchange ended: its leases are released and its reservation settled at `usedTokens` (the rest is
    /// released). Fire and forget; exactly once per grant.
    func settle(_ grant: AdmissionGrant, usedTokens: Int)

    /// `extend` in tokens and nano-dollars at once: both grow, or neither (dollar budgets, issue 23).
    func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void)

    /// `settle` with the tokens and the nano-dollars really spent.
    func settle(_ grant: AdmissionGrant, used amount: BudgetAmount)

    /// An identity's spend for ops (`GET /usage?identity=` on the admin listener): counters and reservations of
    /// the current windows, or nil when the store cannot answer.
    func usageReport(identity: String, wallClockSeconds: Int64, on loop: any LoopScheduler,
                     _ completion: @escaping @Sendable (BudgetReport?) -> Void)

    /// The server stopped, after its exchanges ended (their settles are queued ahead of this): stop background
    /// work and close connections. Called once, by `RelayServer.shutdown()`; a store with nothing running keeps
    /// the default, which does nothing.
    func shutdown()
}

extension AdmissionStore {
    package func shutdown() {}
}

/// A store that keeps no dollars (a test double) grows and settles the tokens only.
extension AdmissionStore {
    package func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        extend(grant, byTokens: amount.tokens, on: loop, completion)
    }

    package func settle(_ grant: AdmissionGrant, used amount: BudgetAmount) {
        settle(grant, usedTokens: amount.tokens)
    }
}

