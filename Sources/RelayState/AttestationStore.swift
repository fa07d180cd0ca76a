import RelayCore
import Transport

/// Where the relay keeps what App Attest needs every replica to agree on: the one-use challenges handed out for
/// registrations, and each registered key with its counter. `MemoryAttestationStore` keeps them in this process;
/// `RedisAttestationStore` in the Redis of `state.redis`, so a challenge issued by one replica is redeemed on
/// another and a counter raised on one refuses a replay on all (README, "Genuine app").
///
/// Every step that must not race is one atomic step in the store: a challenge is redeemed at most once, a key id
/// is registered at most once, and a counter only ever rises (compare-and-set: raised when strictly greater,
/// refused otherwise).
///
/// Completions run on the caller's loop queue, possibly before the call returns (the memory store answers at
/// once); callers must not assume either. A store that cannot answer (Redis down or slow) says `.unavailable`,
/// whatever `state.redis.onUnavailable` says: onUnavailable trades limits for availability, but a counter that
/// cannot be checked cannot refuse a replay, so a proof is never accepted without its store.
package protocol AttestationStore: AnyObject, Sendable {
    /// Keeps `challenge` redeemable once, for `ttlSeconds`. `false` when the store cannot keep it.
    func issueChallenge(_ challenge: String, ttlSeconds: Int, on loop: any LoopScheduler, _ completion: @escaping @Sendable (Bool) -> Void)

    /// Takes `challenge` out of the store: `.redeemed` the first time within its TTL, `.unknown` otherwise (never
    /// issued, already used, expired).
    func redeemChallenge(_ challenge: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void)

    /// Stores a newly attested key, unless its id is registered already (`.unknown` then means "taken").
    func register(_ key: RegisteredAppAttestKey, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreOutcome) -> Void)

    /// The key registered under `keyID` (base64url of its 32 bytes).
    func key(_ keyID: String, on loop: any LoopScheduler, _ completion: @escaping @Sendable (StoreAnswer<RegisteredAppAttestKey>) -> Void)

    /// Raises the key's counter to `counter` if that is strictly greater than the stored one (`.notAbove` when it
    /// is not, a replayed or reordered assertion, or the key is gone). With a `subject` (the request's
    /// authenticated account), first checks that the key serves that account: `.otherSubject`, and nothing
    /// changed, when it is bound to another; a key not bound yet is bound to it with the raise, in the same step.
    func raiseCounter(_ keyID: String, to counter: UInt32, subject: String?, on loop: any LoopScheduler,
                      _ completion: @escaping @Sendable (CounterRaise) -> Void)
}

