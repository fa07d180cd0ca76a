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
public protocol AttestationStore: AnyObject, Sendable {
    /// Keeps `challenge` redeemable once, for `ttlSeconds`. `false` when the store cannot keep it.
    func issueChallenge(_ challenge: String, ttlSeconds: Int, on loop: EventLoop, _ completion: @escaping @Sendable (Bool) -> Void)

    /// Takes `challenge` out of the store: `.redeemed` the first time within its TTL, `.unknown` otherwise (never
    /// issued, already used, expired).
    func redeemChallenge(_ challenge: String, on loop: EventLoop, _ completion: @escaping @Sendable (StoreOutcome) -> Void)

    /// Stores a newly attested key, unless its id is registered already (`.unknown` then means "taken").
    func register(_ key: RegisteredAppAttestKey, on loop: EventLoop, _ completion: @escaping @Sendable (StoreOutcome) -> Void)

    /// The key registered under `keyID` (base64url of its 32 bytes).
    func key(_ keyID: String, on loop: EventLoop, _ completion: @escaping @Sendable (StoreAnswer<RegisteredAppAttestKey>) -> Void)

    /// Raises the key's counter to `counter` if that is strictly greater than the stored one; `.unknown` when it
    /// is not (a replayed or reordered assertion) or the key is gone.
    func raiseCounter(_ keyID: String, to counter: UInt32, on loop: EventLoop, _ completion: @escaping @Sendable (StoreOutcome) -> Void)
}

/// A store's answer to a lookup: the value, absent, or the store could not be asked.
public enum StoreAnswer<Value: Sendable>: Sendable {
    case done(Value)
    case unknown
    case unavailable
}

extension StoreAnswer: Equatable where Value: Equatable {}

/// A store's answer to a change: done, refused (`unknown`: absent, taken, used, stale or not greater, as the
/// call says), or the store could not be asked.
public enum StoreOutcome: Sendable, Equatable {
    case done
    case unknown
    case unavailable
}

/// A registered App Attest key: what the attestation proved, kept for the assertions that follow.
public struct RegisteredAppAttestKey: Sendable, Equatable {
    /// Base64url (no padding) of the 32-byte key id, the SHA-256 of `publicKey`.
    public var keyID: String
    /// X9.62 uncompressed P-256 point (65 bytes).
    public var publicKey: [UInt8]
    /// `TEAMID.bundle.id`: the rpIdHash every assertion must carry.
    public var appID: String
    /// `production` or `development`.
    public var environment: String
    /// Apple's receipt from the attestation statement (for fraud-metric checks with Apple; kept, not used here).
    public var receipt: [UInt8]
    /// The highest assertion counter accepted so far (0 at registration).
    public var counter: UInt32
    /// Unix seconds of the registration.
    public var registeredAt: Int64

    public init(keyID: String, publicKey: [UInt8], appID: String, environment: String, receipt: [UInt8], counter: UInt32 = 0,
                registeredAt: Int64) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.appID = appID
        self.environment = environment
        self.receipt = receipt
        self.counter = counter
        self.registeredAt = registeredAt
    }
}
