import Foundation
import Support

/// Holds the last good JWK Set (RFC 7517 section 5) of a remote JWKS URL and decides when to fetch it again.
/// A pure state machine: it performs no I/O and reads no clock. The owner asks `poll(now:)`, fetches the URL
/// when told to, and reports the outcome with `receive(document:maxAge:now:)` or `fetchFailed(now:)`.
///
/// - The key set is replaced only by a document that parses into at least one usable key; a failed fetch or a
///   garbage document keeps the last good set (forever: stale keys beat no keys).
/// - After a success the next fetch is due `refreshInterval` later, or after the response's `Cache-Control`
///   max-age when given, clamped to [`minimumInterval`, `refreshInterval`].
/// - After a failure retries back off exponentially from `retryDelay` up to `maxRetryDelay`.
/// - A token with an unknown `kid` (`keyNotFound(now:)`) brings the next fetch forward, to no earlier than
///   `minimumInterval` after the previous fetch began, so random kids cannot make the relay hammer the URL.
/// - A fetch that has not been reported within `fetchTimeout` counts as failed.
///
/// A value type, not thread-safe by itself: keep it on one queue or behind a lock.
package struct JWKSCache: Sendable {
    /// Timing of fetches, in seconds.
    package struct Policy: Sendable, Hashable {
        package var refreshInterval: Double
        package var minimumInterval: Double
        package var retryDelay: Double
        package var maxRetryDelay: Double
        package var fetchTimeout: Double

        package init(refreshInterval: Double = 3600, minimumInterval: Double = 60, retryDelay: Double = 5,
                    maxRetryDelay: Double = 300, fetchTimeout: Double = 30) {
            self.refreshInterval = refreshInterval
            self.minimumInterval = minimumInterval
            self.retryDelay = retryDelay
            self.maxRetryDelay = maxRetryDelay
            self.fetchTimeout = fetchTimeout
        }
    }

    /// What `poll(now:)` asks the owner to do.
    package enum Action: Sendable, Hashable {
        /// Fetch the JWKS URL now; report with `receive` or `fetchFailed`.
        case fetch
        /// Nothing to do before this instant (call `poll` again then, or earlier after `keyNotFound`).
        case wait(until: Instant)
    }

    /// What became of a received document.
    package enum Outcome: Sendable, Hashable {
        /// The document replaced the key set.
        case replaced(JWKSetSummary)
        /// The document was refused; the previous key set (if any) stays.
        case rejected(JWKSError)
    }

    /// What a new key set held, for the log line.
    package struct JWKSetSummary: Sendable, Hashable {
        package let keyIDs: [String?]
        package let skipped: [SkippedKey]
    }

    package let policy: Policy
    /// The last good key set; nil until the first good document.
    package private(set) var keys: JWKSet?
    package private(set) var lastSuccess: Instant?
    package private(set) var consecutiveFailures = 0
    /// When the next fetch is due.
    package private(set) var nextFetch: Instant
    /// When the fetch in progress began; nil when none is.
    package private(set) var fetchStartedAt: Instant?
    private var lastFetchStart: Instant?

    /// An empty cache that wants its first fetch at once.
    package init(policy: Policy = Policy(), now: Instant) {
        self.policy = policy
        self.nextFetch = now
    }

    /// The key set, or an empty one before the first good document.
    package var currentKeys: JWKSet { keys ?? .empty }

    /// Says whether to fetch now; `.fetch` marks a fetch as in progress.
    package mutating func poll(now: Instant) -> Action {
        if let started = fetchStartedAt {
            let deadline = started.advanced(bySeconds: policy.fetchTimeout)
            guard now >= deadline else { return .wait(until: deadline) }
            fetchFailed(now: now) // never reported: treat as failed, then decide afresh
        }
        guard now >= nextFetch else { return .wait(until: nextFetch) }
        fetchStartedAt = now
        lastFetchStart = now
        return .fetch
    }

    /// A fetch returned a document (HTTP 200). `maxAge` is the response's Cache-Control max-age, if any.
    @discardableResult
    package mutating func receive(document: Data, maxAge: Double? = nil, now: Instant) -> Outcome {
        let set: JWKSet
        do {
            set = try JWKSet(json: document)
        } catch {
            fetchFailed(now: now)
            return .rejected(error)
        }
        fetchStartedAt = nil
        keys = set
        lastSuccess = now
        consecutiveFailures = 0
        var interval = policy.refreshInterval
        if let maxAge, maxAge.isFinite { interval = min(interval, maxAge) }
        nextFetch = now.advanced(bySeconds: max(interval, policy.minimumInterval))
        return .replaced(JWKSetSummary(keyIDs: set.keys.map(\.keyID), skipped: set.skipped))
    }

    /// A fetch failed (network error, timeout, non-200). The key set stays; the next attempt backs off.
    package mutating func fetchFailed(now: Instant) {
        fetchStartedAt = nil
        consecutiveFailures += 1
        let exponent = Double(min(consecutiveFailures - 1, 30))
        let delay = min(policy.retryDelay * pow(2, exponent), policy.maxRetryDelay)
        nextFetch = now.advanced(bySeconds: delay)
    }

    /// A token named a `kid` the key set lacks: the provider may have rotated keys, so fetch soon.
    package mutating func keyNotFound(now: Instant) {
        let earliest = lastFetchStart.map { $0.advanced(bySeconds: policy.minimumInterval) } ?? now
        nextFetch = min(nextFetch, max(earliest, now))
    }
}
