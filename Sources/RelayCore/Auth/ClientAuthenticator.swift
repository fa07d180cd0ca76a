import Auth
import HTTP1
import Support

/// Checks the caller of a route: a static token (by its SHA-256) or a JWT (signature, alg, exp/nbf/iat, iss,
/// aud). Offline: no network call per request. Shared by every loop; the JWT key set can be replaced by the
/// JWKS refresher at any time (one mutex, taken once per request).
package final class ClientAuthenticator: Sendable {
    private let tokens: TokenAuthenticator?
    private let verifier: Locked<JWTVerifier?>
    private let onUnknownKey: Locked<(@Sendable () -> Void)?> = Locked(nil)

    package init(configuration: ClientsConfiguration) throws {
        tokens = configuration.tokens.isEmpty ? nil
            : try TokenAuthenticator(tokens: configuration.tokens.map { ($0.id, $0.sha256Hex) })
        if let jwt = configuration.jwt {
            verifier = Locked(try JWTVerifier(settings: jwt.settings, hmacSecret: jwt.hmacSecret, keys: jwt.keys))
        } else {
            verifier = Locked(nil)
        }
    }

    /// The identity behind the request, nil for `auth: none`, or why it was refused.
    package func authenticate(_ auth: RelayConfiguration.RouteAuth, headers: HTTPHeaders, now: Double) -> Result<Identity?, AuthError> {
        if auth == .none { return .success(nil) }
        let values = headers.values("Authorization")
        guard values.count <= 1 else { return .failure(.malformed) }
        let bearer: Secret
        switch BearerToken.extract(authorization: values.first) {
        case .success(let token): bearer = token
        case .failure(let error): return .failure(error)
        }
        switch auth {
        case .token:
            guard let tokens else { return .failure(.unknownToken) }
            return tokens.authenticate(bearer: bearer).map { Optional($0) }
        case .jwt:
            guard let verifier = verifier.withLock({ $0 }) else { return .failure(.unsupportedAlgorithm) }
            let result = verifier.verify(bearer, now: now)
            if case .failure(.unknownKey) = result, let hook = onUnknownKey.withLock({ $0 }) { hook() }
            return result.map { Optional($0.identity) }
        case .none:
            return .success(nil)
        }
    }

    /// Replaces the JWT key set (a JWKS refresh that parsed into usable keys).
    package func replaceKeys(_ keys: JWKSet) {
        verifier.withLock { v in v = v?.replacingKeys(keys) }
    }

    /// Called when a token names a key the set lacks (the provider may have rotated keys).
    package func setUnknownKeyHandler(_ handler: @escaping @Sendable () -> Void) {
        onUnknownKey.withLock { $0 = handler }
    }
}

extension AuthError {
    /// The 401 answer: `WWW-Authenticate: Bearer` with the RFC 6750 error, and a JSON body that says what is
    /// wrong without echoing the credential.
    package var relayError: RelayError {
        RelayError(status: 401, type: "authentication_error", code: code, message: message,
                   extraHeaders: [("WWW-Authenticate", wwwAuthenticate)])
    }
}
