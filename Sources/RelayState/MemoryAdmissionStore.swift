import Foundation
import RelayCore
import Support
import Transport

/// The `AdmissionStore` of one replica: the per-address and per-identity token buckets and stream caps
/// (`RateLimiterState`) and the token budgets (`BudgetLedger`), in this process's memory, behind one lock so an
/// admission is one atomic step across all of them. It answers every call at once, synchronously, on the caller's
/// queue. Also the `local` fallback of the Redis store (`state.redis.onUnavailable: local`), so it is a plain
/// class built from the configuration's limits and budgets.
///
/// Grants are tracked here by id (their leases and reservation) until they settle; settling twice, or a grant of
/// another store, does nothing. Safe from any thread or queue (`Locked`).
package final class MemoryAdmissionStore: AdmissionStore {
    /// What one grant holds until it settles.
    struct Held: Sendable {
        var addressLease: RateLimiterState.Lease?
        var identityLease: RateLimiterState.Lease?
        var identity: String?
        var reservation: UInt64?
        /// The reservation in the dollar ledger.
        var dollarReservation: UInt64?
    }

    struct State: Sendable {
        var perAddress: RateLimiterState?
        var perIdentity: RateLimiterState?
        var ledger: BudgetLedger?
        /// Nano-dollars (`BudgetLimits+Dollars`): present whenever `ledger` is.
        var dollars: BudgetLedger?
        // With room from the start: a dictionary type's first storage makes the Swift runtime scan every
        // conformance record for its key's, which otherwise fell on the first request (S1's cold first byte).
        var grants = [UInt64: Held](minimumCapacity: 16)
        var nextGrant: UInt64 = 0
    }

    private let state: Locked<State>
    /// Unix seconds, for the budgets' windows at `extend` and `settle` (an admission brings its own).
    private let wallClock: @Sendable () -> Double

    /// `maxTrackedIdentities` (`limits.maxTrackedIdentities`) bounds the keys each table remembers: the budgets'
    /// (`BudgetLedger`: the least recently used idle key is evicted, never one with an open reservation) and the
    /// buckets' (`RateLimiterState.maxKeys`).
    package init(rateLimits: RelayConfiguration.RateLimitSettings, budgets: BudgetConfiguration?,
                maxTrackedIdentities: Int = BudgetLedger.defaultMaxKeys,
                wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        func bounded(_ limits: RateLimits) -> RateLimiterState {
            var limits = limits
            limits.maxKeys = max(1, maxTrackedIdentities)
            return RateLimiterState(limits: limits)
        }
        state = Locked(State(perAddress: rateLimits.perAddress.map(bounded),
                             perIdentity: rateLimits.perIdentity.map(bounded),
                             ledger: budgets.map { BudgetLedger(perKey: $0.perIdentity, total: $0.total, maxKeys: maxTrackedIdentities) },
                             dollars: budgets.map { BudgetLedger.dollars($0, maxKeys: maxTrackedIdentities) }))
        self.wallClock = wallClock
    }

    package convenience init(configuration: RelayConfiguration,
                            wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.init(rateLimits: configuration.rateLimits, budgets: configuration.budgets,
                  maxTrackedIdentities: configuration.limits.maxTrackedIdentities, wallClock: wallClock)
    }

    /// Budget keys remembered now, and how many idle ones were evicted to make room (for tests and ops).
    package var trackedBudgetKeys: (tracked: Int, evicted: Int) {
        state.withLock { ($0.ledger?.trackedKeys ?? 0, $0.ledger?.evictions ?? 0) }
    }

    /// The decision itself, synchronous (the protocol's `admit` calls it and completes at once). Order: the budget
    /// first (a request it refuses takes no bucket token), then the address's bucket and cap, then the identity's.
    package func admit(_ request: AdmissionRequest, now: Instant) -> AdmissionDecision {
        state.withLock { s in
            if let charge = request.budget,
               let wait = s.ledger?.refusal(key: charge.key, tokens: charge.tokens, now: request.wallClockSeconds) {
                return .refused(.budget(retryAfterSeconds: wait))
            }
            if let charge = request.budget,
               let wait = s.dollars?.refusal(key: charge.key, tokens: charge.nanoUSD, now: request.wallClockSeconds) {
                return .refused(.budget(retryAfterSeconds: wait))
            }
            var held = Held(identity: request.identity)
            if s.perAddress != nil {
                switch s.perAddress!.acquire(key: request.address, now: now) {
                case .allowed(let lease): held.addressLease = lease
                case .limited(let wait, let reason): return .refused(Self.refusal(reason, wait))
                }
            }
            if let identity = request.identity, s.perIdentity != nil {
                switch s.perIdentity!.acquire(key: identity, now: now) {
                case .allowed(let lease): held.identityLease = lease
                case .limited(let wait, let reason):
                    if let lease = held.addressLease { s.perAddress?.release(lease) }
                    return .refused(Self.refusal(reason, wait))
                }
            }
            var reserved = 0
            if let charge = request.budget, s.ledger != nil,
               case .reserved(let id) = s.ledger!.reserve(key: charge.key, tokens: charge.tokens, now: request.wallClockSeconds) {
                held.reservation = id
                reserved = max(charge.tokens, 0)
            }
            // Always opened (if at 0, for a model without a price): spend the provider reports for a priced model is
            // charged at the settle all the same.
            if let charge = request.budget, s.dollars != nil,
               case .reserved(let id) = s.dollars!.reserve(key: charge.key, tokens: charge.nanoUSD, now: request.wallClockSeconds) {
                held.dollarReservation = id
            }
            s.nextGrant &+= 1
            s.grants[s.nextGrant] = held
            return .admitted(AdmissionGrant(id: s.nextGrant, reservedTokens: reserved))
        }
    }

    private static func refusal(_ reason: RateLimiterState.Reason, _ wait: Int) -> AdmissionRefusal {
        reason == .rate ? .rate(retryAfterSeconds: wait) : .concurrency(retryAfterSeconds: wait)
    }

    /// Grows a grant's reservation; true when the budgets cover it (or there are none to cover).
    package func extend(_ grant: AdmissionGrant, byTokens tokens: Int) -> Bool {
        extend(grant, by: BudgetAmount(tokens: tokens))
    }

    /// Grows a grant's token and dollar reservations together: both, or neither.
    package func extend(_ grant: AdmissionGrant, by amount: BudgetAmount) -> Bool {
        let now = Int64(wallClock())
        return state.withLock { s in
            guard let held = s.grants[grant.id] else { return false }
            let dollarID = amount.nanoUSD > 0 ? held.dollarReservation : nil
            if let id = held.reservation, s.ledger?.refusal(extending: id, byTokens: amount.tokens, now: now) != nil { return false }
            if let id = dollarID, s.dollars?.refusal(extending: id, byTokens: amount.nanoUSD, now: now) != nil { return false }
            if let id = held.reservation { _ = s.ledger?.extend(id, byTokens: amount.tokens, now: now) }
            if let id = dollarID { _ = s.dollars?.extend(id, byTokens: amount.nanoUSD, now: now) }
            return true
        }
    }

    /// Grants admitted and not yet settled.
    package var openGrants: Int { state.withLock { $0.grants.count } }

    package func usageReport(identity: String, wallClockSeconds: Int64) -> BudgetReport {
        state.withLock { s in
            let tokens = s.ledger?.report(key: identity, now: wallClockSeconds) ?? []
            return BudgetReport(identity: identity,
                         windows: s.dollars?.addingDollars(to: tokens, key: identity, now: wallClockSeconds) ?? tokens,
                         openStreams: s.perIdentity?.openStreams(key: identity) ?? 0)
        }
    }

    // MARK: AdmissionStore

    package func admit(_ request: AdmissionRequest, on loop: any LoopScheduler, _ completion: @escaping @Sendable (AdmissionDecision) -> Void) {
        completion(admit(request, now: loop.clock.now()))
    }

    package func extend(_ grant: AdmissionGrant, byTokens tokens: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        completion(extend(grant, byTokens: tokens))
    }

    package func extend(_ grant: AdmissionGrant, by amount: BudgetAmount, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void) {
        completion(extend(grant, by: amount))
    }

    package func settle(_ grant: AdmissionGrant, usedTokens: Int) {
        settle(grant, used: BudgetAmount(tokens: usedTokens))
    }

    package func settle(_ grant: AdmissionGrant, used amount: BudgetAmount) {
        let usedTokens = amount.tokens
        let now = Int64(wallClock())
        state.withLock { s in
            guard let held = s.grants.removeValue(forKey: grant.id) else { return }
            if let lease = held.addressLease { s.perAddress?.release(lease) }
            if let lease = held.identityLease { s.perIdentity?.release(lease) }
            if let id = held.reservation { s.ledger?.settle(id, usedTokens: usedTokens, now: now) }
            if let id = held.dollarReservation { s.dollars?.settle(id, usedTokens: amount.nanoUSD, now: now) }
        }
    }

    package func usageReport(identity: String, wallClockSeconds: Int64, on loop: any LoopScheduler,
                            _ completion: @escaping @Sendable (BudgetReport?) -> Void) {
        completion(usageReport(identity: identity, wallClockSeconds: wallClockSeconds))
    }
}
