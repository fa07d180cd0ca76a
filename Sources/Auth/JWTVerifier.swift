import Support

/// The result of a successful verification: the registered claims SSE Relay checked (RFC 7519 section 4.1) and
/// every claim of the payload. It never holds the token itself.
package struct VerifiedToken: Sendable, Hashable {
    package let subject: String
    package let issuer: String
    /// `aud` as a list (a single string becomes one element).
    package let audiences: [String]
    /// `exp`, `nbf`, `iat` in seconds since 1970.
    package let expiresAt: Double
    package let notBefore: Double?
    package let issuedAt: Double?
    package let algorithm: JWTAlgorithm
    package let keyID: String?
    /// The whole payload.
    package let claims: [String: JSONValue]
    /// The caller: `sub`, qualified by `iss` when the verifier accepts more than one issuer.
    package let identity: Identity
}

/// Verifies a JWT in JWS compact serialization (RFC 7519 section 7.2, RFC 7515 section 5.2) signed with HS256,
/// RS256 or ES256 (RFC 7518 section 3), following the JWT BCP (RFC 8725): `alg` must be allowlisted and `none`
/// never is; the key type comes from configuration, not from the token (an HS256 token is only ever checked
/// with the configured HMAC secret, RS256/ES256 only with JWKS keys of that type); the signature is checked
/// before the payload is even decoded; then `exp` (required), `nbf`, `iat` (required, and `exp - iat` at most
/// the configured lifetime), `iss`, `aud` and `sub`.
///
/// Pure: no clock reads (the caller passes `now`), no I/O, no shared mutable state; safe to use from any
/// thread. Replace the keys with `replacingKeys(_:)` when `JWKSCache` has a new set.
package struct JWTVerifier: Sendable, CustomStringConvertible {
    /// What a token must satisfy besides its signature (RFC 7519 section 4.1 claims, RFC 8725 section 3.1 alg).
    package struct Settings: Sendable, Hashable {
        package var algorithms: Set<JWTAlgorithm>
        /// `iss` must equal one of these exactly.
        package var issuers: [String]
        /// At least one `aud` value must equal one of these exactly.
        package var audiences: [String]
        /// Leeway for `exp`, `nbf` and `iat` against `now`, in seconds.
        package var skewSeconds: Double
        /// Longest accepted `exp - iat`, in seconds; a token without `iat` is refused, since its lifetime cannot
        /// be known. A stolen token is worth as much as it has left to live: this caps that at what the issuers
        /// we serve mint (Firebase and Cognito ID tokens live 1 h, Apple's 10 min), whatever a signer was
        /// talked into.
        package var maxLifetimeSeconds: Double

        package static let defaultMaxLifetimeSeconds: Double = 86_400

        package init(algorithms: Set<JWTAlgorithm>, issuers: [String], audiences: [String], skewSeconds: Double = 60,
                    maxLifetimeSeconds: Double = Settings.defaultMaxLifetimeSeconds) {
            self.algorithms = algorithms
            self.issuers = issuers
            self.audiences = audiences
            self.skewSeconds = skewSeconds
            self.maxLifetimeSeconds = maxLifetimeSeconds
        }
    }

    /// Tokens longer than this are `malformed` before any decoding.
    package static let maxTokenBytes = BearerToken.maxBytes

    package let settings: Settings
    package let keys: JWKSet
    private let hmacSecret: Secret?

    /// Throws when the settings cannot work: no algorithm, issuer or audience (accepting any issuer would accept
    /// every project that shares a provider's JWKS), a negative or non-finite skew, HS256 allowed without a
    /// secret, or a secret under 32 bytes (RFC 7518 section 3.2). The secret is used as its UTF-8 bytes.
    package init(settings: Settings, hmacSecret: Secret? = nil, keys: JWKSet = .empty) throws(AuthConfigurationError) {
        guard !settings.algorithms.isEmpty else { throw .noAlgorithms }
        guard !settings.issuers.isEmpty else { throw .noIssuers }
        guard !settings.audiences.isEmpty else { throw .noAudiences }
        guard settings.skewSeconds.isFinite, settings.skewSeconds >= 0 else { throw .invalidSkew }
        guard settings.maxLifetimeSeconds.isFinite, settings.maxLifetimeSeconds > 0 else { throw .invalidMaxLifetime }
        if let bad = settings.issuers.first(where: { $0.contains("|") }) { throw .invalidIssuer(bad) }
        if settings.algorithms.contains(.hs256) {
            guard let hmacSecret, !hmacSecret.isEmpty else { throw .missingHMACSecret }
            guard hmacSecret.revealForHeader().utf8.count >= 32 else { throw .hmacSecretTooShort }
            self.hmacSecret = hmacSecret
        } else {
            self.hmacSecret = nil // never used: HS256 is not allowed
        }
        self.settings = settings
        self.keys = keys
    }

    private init(settings: Settings, keys: JWKSet, hmacSecret: Secret?) {
        self.settings = settings
        self.keys = keys
        self.hmacSecret = hmacSecret
    }

    /// The same verifier with another key set (after a JWKS refresh).
    package func replacingKeys(_ keys: JWKSet) -> JWTVerifier {
        JWTVerifier(settings: settings, keys: keys, hmacSecret: hmacSecret)
    }

    package func verify(_ token: Secret, now: Double) -> Result<VerifiedToken, AuthError> {
        verify(token.revealForHeader(), now: now)
    }

    /// Verifies `token` at wall-clock time `now` (seconds since 1970, the unit of `exp`/`nbf`/`iat`). The steps run
    /// in this order, and the first that fails gives the error: shape, header, signature, then the claims.
    package func verify(_ token: String, now: Double) -> Result<VerifiedToken, AuthError> {
        do throws(AuthError) {
            let parts = try Self.split(token)
            let header = try parseHeader(parts.header)
            try checkSignature(parts, header)
            let claims = try Self.decodeClaims(parts.payload)
            let times = try checkTimes(claims, now: now)
            let issuer = try checkIssuer(claims)
            let audiences = try checkAudiences(claims)
            let subject = try Self.subject(claims)
            return .success(VerifiedToken(
                subject: subject, issuer: issuer, audiences: audiences, expiresAt: times.exp, notBefore: times.nbf,
                issuedAt: times.iat, algorithm: header.algorithm, keyID: header.kid, claims: claims,
                identity: Identity(id: subject, kind: .jwt, issuer: settings.issuers.count > 1 ? issuer : nil)))
        } catch {
            return .failure(error)
        }
    }

    /// The three segments of the compact serialization, still base64url-encoded, and the signed bytes.
    private struct CompactParts {
        var header: ArraySlice<UInt8>
        var payload: ArraySlice<UInt8>
        var signature: ArraySlice<UInt8>
        /// `header.payload`, what the signature covers (RFC 7515 section 5.2 step 8).
        var signingInput: ArraySlice<UInt8>
    }

    /// Compact serialization: exactly three segments; header and payload must not be empty.
    private static func split(_ token: String) throws(AuthError) -> CompactParts {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw .missing }
        guard utf8.count <= Self.maxTokenBytes else { throw .malformed }
        let bytes = Array(utf8)
        var dots: [Int] = []
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(index)
            if dots.count > 2 { throw .malformed }
        }
        guard dots.count == 2, dots[0] > 0, dots[1] > dots[0] + 1 else { throw .malformed }
        return CompactParts(
            header: bytes[0..<dots[0]],
            payload: bytes[(dots[0] + 1)..<dots[1]],
            signature: bytes[(dots[1] + 1)...],
            signingInput: bytes[0..<dots[1]])
    }

    /// What the JOSE header says that verification uses.
    private struct Header {
        var algorithm: JWTAlgorithm
        var kid: String?
    }

    /// Header: alg (allowlisted), optional kid, no crit (no extension is understood, RFC 7515 section 4.1.11).
    private func parseHeader(_ part: ArraySlice<UInt8>) throws(AuthError) -> Header {
        guard let headerBytes = Base64URL.decode(bytes: part),
              let header = JSONValue.parseObject(headerBytes) else { throw .malformed }
        guard header["crit"] == nil else { throw .malformed }
        guard case .string(let algName)? = header["alg"] else { throw .malformed }
        guard let algorithm = JWTAlgorithm(rawValue: algName), settings.algorithms.contains(algorithm) else {
            throw .unsupportedAlgorithm
        }
        switch header["kid"] {
        case nil: return Header(algorithm: algorithm, kid: nil)
        case .string(let value)?: return Header(algorithm: algorithm, kid: value)
        default: throw .malformed
        }
    }

    /// Where a signature may come from: the configured HMAC secret for HS256, JWKS keys of the token's type for
    /// RS256/ES256 (RFC 8725 section 3.1: the algorithm picks the key type, never the other way round).
    private enum SigningKeys {
        case hmac(Secret)
        case jwks([JWK])
    }

    /// The keys that may have signed a token with this header; `unknownKey` when the key set has none.
    private func selectKeys(_ header: Header) throws(AuthError) -> SigningKeys {
        switch header.algorithm {
        case .hs256:
            guard let hmacSecret else { throw .unsupportedAlgorithm } // unreachable: init enforces it
            return .hmac(hmacSecret)
        case .rs256, .es256:
            let candidates = keys.candidates(for: header.algorithm, kid: header.kid)
            guard !candidates.isEmpty else { throw .unknownKey }
            return .jwks(candidates)
        }
    }

    /// Signature, before anything of the payload is looked at.
    private func checkSignature(_ parts: CompactParts, _ header: Header) throws(AuthError) {
        guard let signature = Base64URL.decode(bytes: parts.signature), !signature.isEmpty else { throw .malformed }
        let valid: Bool
        switch try selectKeys(header) {
        case .hmac(let secret):
            let expected = Crypto.hmacSHA256(key: secret.revealForHeader().utf8, message: parts.signingInput)
            valid = Crypto.equal(expected, signature)
        case .jwks(let candidates):
            valid = candidates.contains { jwk in
                header.algorithm == .rs256
                    ? jwk.key.verifyRS256(message: parts.signingInput, signature: signature)
                    : jwk.key.verifyES256(message: parts.signingInput, signature: signature)
            }
        }
        guard valid else { throw .badSignature }
    }

    /// The payload as a JSON object: the claims (RFC 7519 section 4). A registered claim of the wrong type is
    /// malformed, in each check below.
    private static func decodeClaims(_ part: ArraySlice<UInt8>) throws(AuthError) -> [String: JSONValue] {
        guard let payloadBytes = Base64URL.decode(bytes: part),
              let claims = JSONValue.parseObject(payloadBytes) else { throw .malformed }
        return claims
    }

    /// `exp` (required), `nbf`, `iat` (required) against `now` within the skew, and the lifetime `exp - iat`.
    /// Each check is written as "accept only if", so a NaN `now` fails closed.
    private func checkTimes(
        _ claims: [String: JSONValue], now: Double
    ) throws(AuthError) -> (exp: Double, nbf: Double?, iat: Double) {
        let skew = settings.skewSeconds
        guard case .number(let exp)? = claims["exp"] else { throw .malformed }
        guard now < exp + skew else { throw .expired }
        var nbf: Double?
        if let value = claims["nbf"] {
            guard case .number(let number) = value else { throw .malformed }
            guard number <= now + skew else { throw .notYetValid }
            nbf = number
        }
        var iat: Double?
        if let value = claims["iat"] {
            guard case .number(let number) = value else { throw .malformed }
            guard number <= now + skew else { throw .issuedInFuture }
            iat = number
        }
        // The lifetime the issuer gave the token, not what is left of it: no skew, both ends come from the token.
        guard let issuedAt = iat else { throw .missingIssuedAt }
        guard exp - issuedAt <= settings.maxLifetimeSeconds else { throw .lifetimeTooLong }
        return (exp, nbf, issuedAt)
    }

    /// `iss`: required, one of the configured issuers exactly.
    private func checkIssuer(_ claims: [String: JSONValue]) throws(AuthError) -> String {
        switch claims["iss"] {
        case nil: throw .wrongIssuer
        case .string(let value)?:
            guard settings.issuers.contains(value) else { throw .wrongIssuer }
            return value
        default: throw .malformed
        }
    }

    /// `aud`: required, a string or an array of strings, at least one of them a configured audience.
    private func checkAudiences(_ claims: [String: JSONValue]) throws(AuthError) -> [String] {
        var audiences: [String] = []
        switch claims["aud"] {
        case nil: throw .wrongAudience
        case .string(let value)?: audiences = [value]
        case .array(let values)?:
            for value in values {
                guard case .string(let audience) = value else { throw .malformed }
                audiences.append(audience)
            }
        default: throw .malformed
        }
        guard audiences.contains(where: settings.audiences.contains) else { throw .wrongAudience }
        return audiences
    }

    /// `sub`: required and not empty, since it becomes the caller's identity.
    private static func subject(_ claims: [String: JSONValue]) throws(AuthError) -> String {
        switch claims["sub"] {
        case nil: throw .missingSubject
        case .string(let value)?:
            guard !value.isEmpty else { throw .missingSubject }
            return value
        default: throw .malformed
        }
    }

    package var description: String {
        let algorithms = settings.algorithms.map(\.rawValue).sorted().joined(separator: ",")
        return "JWTVerifier(algorithms: \(algorithms), issuers: \(settings.issuers), audiences: \(settings.audiences), "
            + "skew: \(settings.skewSeconds)s, maxLifetime: \(settings.maxLifetimeSeconds)s, hmacSecret: \(hmacSecret == nil ? "none" : "<redacted>"), \(keys))"
    }
}
