// A state store's answers, as values (RelayState's stores give them; the attestation policy reads them).

/// A store's answer to a lookup: the value, absent, or the store could not be asked.
package enum StoreAnswer<Value: Sendable>: Sendable {
    case done(Value)
    case unknown
    case unavailable
}

extension StoreAnswer: Equatable where Value: Equatable {}

/// A store's answer to a change: done, refused (`unknown`: absent, taken, used, stale or not greater, as the
/// call says), or the store could not be asked.
package enum StoreOutcome: Sendable, Equatable {
    case done
    case unknown
    case unavailable
}

/// A store's answer to an assertion's counter raise (`AttestationStore.raiseCounter`).
package enum CounterRaise: Sendable, Equatable {
    /// Raised: the counter was strictly above the stored one (and the key is now bound to the subject, if it
    /// was not yet).
    case raised
    /// Not raised: the counter was not above the stored one (a replay, a reordered assertion), or the key is gone.
    case notAbove
    /// Not raised: the key belongs to another account (`RegisteredAppAttestKey.subject`).
    case otherSubject
    case unavailable
}

/// A registered App Attest key: what the attestation proved, kept for the assertions that follow.
package struct RegisteredAppAttestKey: Sendable, Equatable {
    /// Base64url (no padding) of the 32-byte key id, the SHA-256 of `publicKey`.
    package var keyID: String
    /// X9.62 uncompressed P-256 point (65 bytes).
    package var publicKey: [UInt8]
    /// `TEAMID.bundle.id`: the rpIdHash every assertion must carry.
    package var appID: String
    /// `production` or `development`.
    package var environment: String
    /// Apple's receipt from the attestation statement (for fraud-metric checks with Apple; kept, not used here).
    package var receipt: [UInt8]
    /// The highest assertion counter accepted so far (0 at registration).
    package var counter: UInt32
    /// Unix seconds of the registration.
    package var registeredAt: Int64
    /// The account (the authenticated identity's key) the key serves: the first that asserted with it on a route
    /// with `auth`; nil until then. One device key serves one account, so a device cannot spread its proofs over
    /// the limits and budgets of many.
    package var subject: String?

    package init(keyID: String, publicKey: [UInt8], appID: String, environment: String, receipt: [UInt8], counter: UInt32 = 0,
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
