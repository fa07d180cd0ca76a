import Auth
import Support

/// Where a `JWKSRefresher` hands a fresh key set, and who tells it that a token named a key the set lacks: the
/// client authenticator (`clients.jwt`) and the App Check verifier (`attestation.firebase`).
package protocol JWKSKeySink: AnyObject, Sendable {
    func replaceKeys(_ keys: JWKSet)
    func setUnknownKeyHandler(_ handler: @escaping @Sendable () -> Void)
}

extension ClientAuthenticator: JWKSKeySink {}

/// Verifies Firebase App Check tokens (`X-Firebase-AppCheck`) offline with `JWTVerifier`: RS256 only, keys from
/// the project's JWKS; `iss` is `https://firebaseappcheck.googleapis.com/<projectNumber>`, `aud` an array that holds
/// `projects/<projectNumber>`, `sub` one of the configured app ids, `exp` and `iat` within `clients.jwt.skewSeconds`
/// (60 s without `clients.jwt`), and a lifetime of at most 7 days (the longest App Check allows). Shared by every
/// loop; the key set is replaced by the refresher under one lock.
package final class AppCheckVerifier: JWKSKeySink {
    private let verifier: Locked<JWTVerifier>
    private let appIds: Set<String>
    private let onUnknownKey = Locked<(@Sendable () -> Void)?>(nil)

    package init(configuration: AttestationConfiguration.Firebase, skewSeconds: Double) throws {
        let settings = JWTVerifier.Settings(algorithms: [.rs256], issuers: [configuration.issuer], audiences: [configuration.audience],
                                            skewSeconds: skewSeconds,
                                            maxLifetimeSeconds: AttestationConfiguration.Firebase.maxTokenLifetimeSeconds)
        verifier = Locked(try JWTVerifier(settings: settings, keys: configuration.keys))
        appIds = Set(configuration.appIds)
    }

    /// The app id (`sub`) of a valid token, or the reason it is not (for the log: never the token).
    package func verify(_ token: String, now: Double) -> Result<String, AppCheckRefusal> {
        let result = verifier.withLock { $0 }.verify(token, now: now)
        switch result {
        case .failure(let error):
            if error == .unknownKey, let hook = onUnknownKey.withLock({ $0 }) { hook() }
            return .failure(AppCheckRefusal(reason: error.code))
        case .success(let verified):
            // App Check always sends an array (`["projects/<number>", "projects/<id>"]`); a bare string is not
            // such a token, whoever signed it.
            guard case .array? = verified.claims["aud"] else { return .failure(AppCheckRefusal(reason: "audience_not_array")) }
            guard appIds.contains(verified.subject) else { return .failure(AppCheckRefusal(reason: "app_not_allowed")) }
            return .success(verified.subject)
        }
    }

    package func replaceKeys(_ keys: JWKSet) {
        verifier.withLock { $0 = $0.replacingKeys(keys) }
    }

    package func setUnknownKeyHandler(_ handler: @escaping @Sendable () -> Void) {
        onUnknownKey.withLock { $0 = handler }
    }
}

/// Why an App Check token was refused: the JWT check's code (`token_expired`, `token_wrong_issuer`, …),
/// `audience_not_array` or `app_not_allowed`.
package struct AppCheckRefusal: Error, Equatable, Sendable {
    package var reason: String
}
