import Support

/// Limits applied per key (an authenticated identity, or the client's address): a token bucket refilled at
/// `requestsPerMinute` holding at most `burst` requests, and a cap on streams open at once. Plain configuration.
package struct RateLimits: Equatable, Sendable {
    /// Sustained rate; `nil` for no rate limit. Kept within 1...1_000_000_000.
    package var requestsPerMinute: Int?
    /// Bucket capacity (requests that may arrive at once after an idle period). Kept within 1...100_000_000.
    package var burst: Int
    /// Streams one key may have open at once; `nil` for no cap. Below 0 acts as 0.
    package var maxConcurrentStreams: Int?
    /// Most keys tracked at once; memory stays proportional to this, whatever the number of distinct keys.
    package var maxKeys: Int
    /// Retry-After sent with a concurrency refusal: when a stream will end is unknowable, so this is a hint.
    package var concurrencyRetryAfterSeconds: Int
    /// Idle keys are swept at least this often (and whenever the key table is full).
    package var sweepIntervalSeconds: Int

    /// `burst` defaults to `requestsPerMinute` (or 1 when there is no rate limit).
    package init(
        requestsPerMinute: Int?, burst: Int? = nil, maxConcurrentStreams: Int? = nil, maxKeys: Int = 100_000,
        concurrencyRetryAfterSeconds: Int = 1, sweepIntervalSeconds: Int = 60
    ) {
        self.requestsPerMinute = requestsPerMinute.map { min(max($0, 1), 1_000_000_000) }
        self.burst = min(max(burst ?? requestsPerMinute ?? 1, 1), 100_000_000)
        self.maxConcurrentStreams = maxConcurrentStreams.map { max($0, 0) }
        self.maxKeys = max(maxKeys, 1)
        self.concurrencyRetryAfterSeconds = max(concurrencyRetryAfterSeconds, 1)
        self.sweepIntervalSeconds = max(sweepIntervalSeconds, 1)
    }
}

/// The rate limiter's whole state as a value: one token bucket and the open streams per key. Pure: time comes in
/// as `now`, nothing is read from a clock. Mutable; whoever holds it owns it (`RateLimiter` keeps it behind a
/// mutex).
///
/// Arithmetic is exact integers: one token is 60·10⁹ units and every nanosecond adds `requestsPerMinute` units, so
/// refills and Retry-After values have no rounding drift. Time that appears to run backwards (two event loops
/// reading the clock in one order and taking the lock in the other) counts as no time passing.
///
/// Memory: a key whose bucket is full and has no open stream is *idle*; an idle entry is indistinguishable from
/// no entry, so sweeping idle keys never changes a decision. Sweeps run every `sweepIntervalSeconds` and whenever
/// a new key finds the table at `maxKeys`. If the table is still full of non-idle keys, the new key is not
/// tracked on its own but shares one *overflow* bucket (same limits) with every other untracked key. That is the
/// fail-safe: memory stays bounded, tracked keys keep their limits (a busy key is never evicted, so spraying new
/// keys cannot reset anyone's bucket), and spraying can win at most one extra key's worth of requests, at the cost
/// of new clients sharing that bucket until the flood passes.
package struct RateLimiterState: Sendable {
    /// Which limit refused a request.
    package enum Reason: Equatable, Sendable {
        /// The key's bucket is empty.
        case rate
        /// The key already has `maxConcurrentStreams` streams open.
        case concurrency
    }

    /// One admitted request. Pass it to `release(_:)` exactly once, when its stream ends (releasing twice, or a
    /// lease from another limiter, is a no-op).
    package struct Lease: Hashable, Sendable {
        /// Where the lease's stream is counted: the key's own bucket, the shared overflow bucket, or nowhere.
        enum Slot: Hashable, Sendable {
            case key, overflow, untracked
        }

        package let key: String
        let id: UInt64
        let slot: Slot

        /// True when the key was not tracked on its own (table full) and shares the overflow bucket.
        package var isOverflow: Bool { slot == .overflow }
    }

    /// The answer to `acquire`: a lease to release when the stream ends, or a refusal with its Retry-After.
    package enum Decision: Equatable, Sendable {
        case allowed(Lease)
        case limited(retryAfterSeconds: Int, reason: Reason)

        /// The 429 to answer, or nil when allowed.
        package var error: RelayError? {
            switch self {
            case .allowed: nil
            case .limited(let seconds, .rate): .rateLimited(retryAfterSeconds: seconds)
            case .limited(let seconds, .concurrency): .concurrencyLimited(retryAfterSeconds: seconds)
            }
        }
    }

    /// One key's token bucket and open streams.
    struct Bucket {
        /// Tokens held, in units of 1/(60·10⁹) token.
        var units: Int
        /// The instant `units` was last brought up to date, in nanoseconds.
        var refilledAt: UInt64
        /// Ids of the leases open on this key.
        var leases: [UInt64] = []
    }

    static let unitsPerToken = 60_000_000_000

    package let limits: RateLimits
    private var buckets: [String: Bucket] = [:]
    private var overflow: Bucket
    private var nextLeaseID: UInt64 = 0
    private var lastSweep: UInt64?
    /// Whether the last sweep freed a quarter of the table: if so, sweeping again at the cap is amortized O(1)
    /// per new key; if not, sweeps at the cap wait a second so a flood cannot make every request O(maxKeys).
    private var lastSweepFreedPlenty = true

    package init(limits: RateLimits) {
        self.limits = limits
        overflow = Bucket(units: limits.burst * Self.unitsPerToken, refilledAt: 0)
    }

    /// Keys tracked on their own right now (at most `limits.maxKeys`).
    package var trackedKeys: Int { buckets.count }

    /// Streams open on `key`'s own bucket.
    package func openStreams(key: String) -> Int { buckets[key]?.leases.count ?? 0 }

    /// Streams open on the shared overflow bucket.
    package var overflowStreams: Int { overflow.leases.count }

    private var capacity: Int { limits.burst * Self.unitsPerToken }

    /// Admits one request for `key` at `now`, or says why not and for how long. A refused request consumes
    /// nothing. The concurrency cap is checked first: a client at its cap learns that, not a rate wait.
    package mutating func acquire(key: String, now: Instant) -> Decision {
        if limits.requestsPerMinute == nil && limits.maxConcurrentStreams == nil {
            return .allowed(newLease(key: key, slot: .untracked))
        }
        sweepIfDue(now: now.nanoseconds)
        if var bucket = buckets[key] {
            let decision = admit(&bucket, key: key, slot: .key, now: now.nanoseconds)
            buckets[key] = bucket
            return decision
        }
        var fresh = Bucket(units: capacity, refilledAt: now.nanoseconds)
        if buckets.count >= limits.maxKeys {
            let aSecondSinceLastSweep = lastSweep.map { now.nanoseconds >= $0 &+ 1_000_000_000 } ?? true
            if lastSweepFreedPlenty || aSecondSinceLastSweep { prune(now: now) }
            if buckets.count >= limits.maxKeys {
                var shared = overflow
                let decision = admit(&shared, key: key, slot: .overflow, now: now.nanoseconds)
                overflow = shared
                return decision
            }
        }
        let decision = admit(&fresh, key: key, slot: .key, now: now.nanoseconds)
        if case .allowed = decision { buckets[key] = fresh }
        return decision
    }

    /// The Retry-After `acquire` would answer if `key`'s bucket is empty now, without taking anything: for a
    /// bucket that only failures draw from (failed authentication), checked before every attempt. A key without a
    /// bucket of its own has failed nothing lately: nil, even while the table is full and the shared overflow
    /// bucket is empty. Answering for that bucket would let a flood of failures from addresses sprayed past
    /// `maxKeys` refuse every new client, valid credentials included, before they are read.
    package func retryAfterIfEmpty(key: String, now: Instant) -> Int? {
        guard let rpm = limits.requestsPerMinute, var bucket = buckets[key] else { return nil }
        refill(&bucket, now: now.nanoseconds)
        return bucket.units >= Self.unitsPerToken ? nil : Self.secondsUntilOneToken(bucket, rpm: rpm)
    }

    private static func secondsUntilOneToken(_ bucket: Bucket, rpm: Int) -> Int {
        let waitNs = (unitsPerToken - bucket.units + rpm - 1) / rpm
        return max(1, (waitNs + 999_999_999) / 1_000_000_000)
    }

    /// Gives back the token the `acquire` that made `lease` took (the request turned out not to be what the bucket
    /// counts, e.g. a failure bucket's charge taken in advance), to the bucket it came from: the key's own, or the
    /// shared overflow bucket when the key was not tracked. A full bucket stays full; a forgotten key's bucket is
    /// full already. Refund each lease at most once (the caller keeps that count).
    package mutating func refund(_ lease: Lease, now: Instant) {
        guard limits.requestsPerMinute != nil else { return }
        switch lease.slot {
        case .untracked:
            return
        case .overflow:
            var shared = overflow
            refill(&shared, now: now.nanoseconds)
            shared.units = min(capacity, shared.units + Self.unitsPerToken)
            overflow = shared
        case .key:
            guard var bucket = buckets[lease.key] else { return }
            refill(&bucket, now: now.nanoseconds)
            bucket.units = min(capacity, bucket.units + Self.unitsPerToken)
            buckets[lease.key] = bucket
        }
    }

    /// Ends the stream `lease` admitted.
    package mutating func release(_ lease: Lease) {
        switch lease.slot {
        case .untracked:
            return
        case .overflow:
            if let i = overflow.leases.firstIndex(of: lease.id) { overflow.leases.remove(at: i) }
        case .key:
            guard var bucket = buckets[lease.key], let i = bucket.leases.firstIndex(of: lease.id) else { return }
            bucket.leases.remove(at: i)
            buckets[lease.key] = bucket
        }
    }

    /// Forgets every idle key (full bucket, no open stream); returns how many. Changes no future decision.
    @discardableResult
    package mutating func prune(now: Instant) -> Int {
        let before = buckets.count
        let nowNs = now.nanoseconds
        buckets = buckets.filter { !isIdle($0.value, now: nowNs) }
        lastSweep = nowNs
        let freed = before - buckets.count
        lastSweepFreedPlenty = freed >= max(1, limits.maxKeys / 4)
        return freed
    }

    private mutating func sweepIfDue(now: UInt64) {
        guard let last = lastSweep else {
            lastSweep = now
            return
        }
        if now > last && now - last >= UInt64(limits.sweepIntervalSeconds) * 1_000_000_000 {
            prune(now: Instant(nanoseconds: now))
        }
    }

    private func isIdle(_ bucket: Bucket, now: UInt64) -> Bool {
        guard bucket.leases.isEmpty else { return false }
        var copy = bucket
        refill(&copy, now: now)
        return limits.requestsPerMinute == nil || copy.units >= capacity
    }

    private func refill(_ bucket: inout Bucket, now: UInt64) {
        guard now > bucket.refilledAt else { return }
        if let rpm = limits.requestsPerMinute {
            let missing = capacity - bucket.units
            if missing > 0 {
                let elapsed = now - bucket.refilledAt
                let fullAfter = UInt64((missing + rpm - 1) / rpm)
                bucket.units = elapsed >= fullAfter ? capacity : bucket.units + Int(elapsed) * rpm
            }
        }
        bucket.refilledAt = now
    }

    private mutating func admit(_ bucket: inout Bucket, key: String, slot: Lease.Slot, now: UInt64) -> Decision {
        refill(&bucket, now: now)
        if let cap = limits.maxConcurrentStreams, bucket.leases.count >= cap {
            return .limited(retryAfterSeconds: limits.concurrencyRetryAfterSeconds, reason: .concurrency)
        }
        if let rpm = limits.requestsPerMinute {
            guard bucket.units >= Self.unitsPerToken else {
                return .limited(retryAfterSeconds: Self.secondsUntilOneToken(bucket, rpm: rpm), reason: .rate)
            }
            bucket.units -= Self.unitsPerToken
        }
        let lease = newLease(key: key, slot: slot)
        if limits.maxConcurrentStreams != nil { bucket.leases.append(lease.id) }   // no cap: nothing to count
        return .allowed(lease)
    }

    private mutating func newLease(key: String, slot: Lease.Slot) -> Lease {
        nextLeaseID &+= 1
        return Lease(key: key, id: nextLeaseID, slot: slot)
    }
}

/// The rate limiter shared by every event loop: `RateLimiterState` behind one lock (`Locked`). Each request takes the
/// lock once to acquire and once to release its lease, never per chunk. Safe from any thread or queue.
package final class RateLimiter: Sendable {
    private let state: Locked<RateLimiterState>

    package init(limits: RateLimits) {
        state = Locked(RateLimiterState(limits: limits))
    }

    package var limits: RateLimits { state.withLock { $0.limits } }

    package func acquire(key: String, now: Instant) -> RateLimiterState.Decision {
        state.withLock { $0.acquire(key: key, now: now) }
    }

    package func retryAfterIfEmpty(key: String, now: Instant) -> Int? {
        state.withLock { $0.retryAfterIfEmpty(key: key, now: now) }
    }

    /// Takes one token from `key`'s bucket and gives no lease back: a failure bucket's charge (an empty bucket
    /// stays empty; nothing is refused here, the next `retryAfterIfEmpty` says so).
    package func charge(key: String, now: Instant) {
        state.withLock { s in
            if case .allowed(let lease) = s.acquire(key: key, now: now) { s.release(lease) }
        }
    }

    package func release(_ lease: RateLimiterState.Lease) {
        state.withLock { $0.release(lease) }
    }

    package func refund(_ lease: RateLimiterState.Lease, now: Instant) {
        state.withLock { $0.refund(lease, now: now) }
    }

    @discardableResult
    package func prune(now: Instant) -> Int { state.withLock { $0.prune(now: now) } }

    package var trackedKeys: Int { state.withLock { $0.trackedKeys } }
}

extension RelayError {
    /// 429 `rate_limit_exceeded`, with `Retry-After`.
    package static func rateLimited(retryAfterSeconds: Int) -> RelayError {
        RelayError(status: 429, type: "rate_limit_error", code: "rate_limit_exceeded",
                   message: "Too many requests; retry after the time in Retry-After.",
                   extraHeaders: [("Retry-After", String(retryAfterSeconds))])
    }

    /// 429 `concurrency_limit_exceeded`, with `Retry-After`.
    package static func concurrencyLimited(retryAfterSeconds: Int) -> RelayError {
        RelayError(status: 429, type: "rate_limit_error", code: "concurrency_limit_exceeded",
                   message: "Too many streams open at once; retry when one has finished.",
                   extraHeaders: [("Retry-After", String(retryAfterSeconds))])
    }
}
