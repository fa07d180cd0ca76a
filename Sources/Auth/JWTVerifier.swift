import Support

/// The result of a successful verification: the registered claims SSE Relay checked (RFC 7519 section 4.1) and
/// every claim of the payload. It never holds the token itself.
public struct VerifiedToken: Sendable, Hashable {
    public let subject: String
    public let issuer: String
    /// `aud` as a list (a single string becomes one element).
    public let audiences: [String]
    /// `exp`, `nbf`, `iat` in seconds since 1970.
    public let expiresAt: Double
    public let notBefore: Double?
    public let issuedAt: Double?
    public let algorithm: JWTAlgorithm
    public let keyID: String?
    /// The whole payload.
    public let claims: [String: JSONValue]
    /// The caller: `sub`, qualified by `iss` when the verifier accepts more than one issuer.
    public let identity: Identity
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
public struct JWTVerifier: Sendable, CustomStringConvertible {
    /// What a token must satisfy besides its signature (RFC 7519 section 4.1 claims, RFC 8725 section 3.1 alg).
    public struct Settings: Sendable, Hashable {
        public var algorithms: Set<JWTAlgorithm>
        /// `iss` must equal one of these exactly.
        public var issuers: [String]
        /// At least one `aud` value must equal one of these exactly.
        public var audiences: [String]
        /// Leeway for `exp`, `nbf` and `iat` against `now`, in seconds.
        public var skewSeconds: Double
        /// Longest accepted `exp - iat`, in seconds; a token without `iat` is refused, since its lifetime cannot
        /// be known. A stolen token is worth as much as it has left to live: this caps that at what the issuers
        /// we serve mint (Firebase and Cognito ID tokens live 1 h, Apple's 10 min), whatever a signer was
        /// talked into.
        public var maxLifetimeSeconds: Double

        public static let defaultMaxLifetimeSeconds: Double = 86_400

        public init(algorithms: Set<JWTAlgorithm>, issuers: [String], audiences: [String], skewSeconds: Double = 60,
                    maxLifetimeSeconds: Double = Settings.defaultMaxLifetimeSeconds) {
            self.algorithms = algorithms
            self.issuers = issuers
            self.audiences = audiences
            self.skewSeconds = skewSeconds
            self.maxLifetimeSeconds = maxLifetimeSeconds
        }
    }

    /// Tokens longer than this are `malformed` before any decoding.
    public static let maxTokenBytes = BearerToken.maxBytes

    public let settings: Settings
    public let keys: JWKSet
    private let hmacSecret: Secret?

    /// Throws when the settings cannot work: no algorithm, issuer or audience (accepting any issuer would accept
    /// every project that shares a provider's JWKS), a negative or non-finite skew, HS256 allowed without a
    /// secret, or a secret under 32 bytes (RFC 7518 section 3.2). The secret is used as its UTF-8 bytes.
    public init(settings: Settings, hmacSecret: Secret? = nil, keys: JWKSet = .empty) throws(AuthConfigurationError) {
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
    public func replacingKeys(_ keys: JWKSet) -> JWTVerifier {
        JWTVerifier(settings: settings, keys: keys, hmacSecret: hmacSecret)
    }

    public func verify(_ token: Secret, now: Double) -> Result<VerifiedToken, AuthError> {
        verify(token.revealForHeader(), now: now)
    }

    /// Verifies `token` at wall-clock time `now` (seconds since 1970, the unit of `exp`/`nbf`/`iat`).
    public func verify(_ token: String, now: Double) -> Result<VerifiedToken, AuthError> {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { return .failure(.missing) }
        guard utf8.count <= Self.maxTokenBytes else { return .failure(.malformed) }
        let bytes = Array(utf8)

        // Compact serialization: exactly three segments; header and payload must not be empty.
        var dots: [Int] = []
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(index)
            if dots.count > 2 { return .failure(.malformed) }
        }
        guard dots.count == 2, dots[0] > 0, dots[1] > dots[0] + 1 else { return .failure(.malformed) }
        let headerPart = bytes[0..<dots[0]]
        let payloadPart = bytes[(dots[0] + 1)..<dots[1]]
        let signaturePart = bytes[(dots[1] + 1)...]
        let signingInput = bytes[0..<dots[1]]

        // Header: alg (allowlisted), optional kid, no crit (no extension is understood, RFC 7515 section 4.1.11).
        guard let headerBytes = Base64URL.decode(bytes: headerPart),
              let header = JSONValue.parseObject(headerBytes) else { return .failure(.malformed) }
        guard header["crit"] == nil else { return .failure(.malformed) }
        guard case .string(let algName)? = header["alg"] else { return .failure(.malformed) }
        guard let algorithm = JWTAlgorithm(rawValue: algName), settings.algorithms.contains(algorithm) else {
            return .failure(.unsupportedAlgorithm)
        }
        let kid: String?
        switch header["kid"] {
        case nil: kid = nil
        case .string(let value)?: kid = value
        default: return .failure(.malformed)
        }

        // Signature, before anything of the payload is looked at.
        guard let signature = Base64URL.decode(bytes: signaturePart), !signature.isEmpty else {
            return .failure(.malformed)
        }
        switch algorithm {
        case .hs256:
            guard let hmacSecret else { return .failure(.unsupportedAlgorithm) } // unreachable: init enforces it
            let expected = Crypto.hmacSHA256(key: hmacSecret.revealForHeader().utf8, message: signingInput)
            guard Crypto.equal(expected, signature) else { return .failure(.badSignature) }
        case .rs256, .es256:
            let candidates = keys.candidates(for: algorithm, kid: kid)
            guard !candidates.isEmpty else { return .failure(.unknownKey) }
            let valid = candidates.contains { jwk in
                algorithm == .rs256
                    ? jwk.key.verifyRS256(message: signingInput, signature: signature)
                    : jwk.key.verifyES256(message: signingInput, signature: signature)
            }
            guard valid else { return .failure(.badSignature) }
        }

        // Claims (RFC 7519 section 4.1). A registered claim of the wrong type is malformed.
        guard let payloadBytes = Base64URL.decode(bytes: payloadPart),
              let claims = JSONValue.parseObject(payloadBytes) else { return .failure(.malformed) }
        let skew = settings.skewSeconds
        guard case .number(let exp)? = claims["exp"] else { return .failure(.malformed) }
        // Each check is written as "accept only if", so a NaN `now` fails closed.
        guard now < exp + skew else { return .failure(.expired) }
        var nbf: Double?
        if let value = claims["nbf"] {
            guard case .number(let number) = value else { return .failure(.malformed) }
            guard number <= now + skew else { return .failure(.notYetValid) }
            nbf = number
        }
        var iat: Double?
        if let value = claims["iat"] {
            guard case .number(let number) = value else { return .failure(.malformed) }
            guard number <= now + skew else { return .failure(.issuedInFuture) }
            iat = number
        }
        // The lifetime the issuer gave the token, not what is left of it: no skew, both ends come from the token.
        guard let issuedAt = iat else { return .failure(.missingIssuedAt) }
        guard exp - issuedAt <= settings.maxLifetimeSeconds else { return .failure(.lifetimeTooLong) }
        let issuer: String
        switch claims["iss"] {
        case nil: return .failure(.wrongIssuer)
        case .string(let value)?:
            guard settings.issuers.contains(value) else { return .failure(.wrongIssuer) }
            issuer = value
        default: return .failure(.malformed)
        }
        var audiences: [String] = []
        switch claims["aud"] {
        case nil: return .failure(.wrongAudience)
        case .string(let value)?: audiences = [value]
        case .array(let values)?:
            for value in values {
                guard case .string(let audience) = value else { return .failure(.malformed) }
                audiences.append(audience)
            }
        default: return .failure(.malformed)
        }
        guard audiences.contains(where: settings.audiences.contains) else { return .failure(.wrongAudience) }
        let subject: String
        switch claims["sub"] {
        case nil: return .failure(.missingSubject)
        case .string(let value)?:
            guard !value.isEmpty else { return .failure(.missingSubject) }
            subject = value
        default: return .failure(.malformed)
        }
        return .success(VerifiedToken(
            subject: subject, issuer: issuer, audiences: audiences, expiresAt: exp, notBefore: nbf, issuedAt: iat,
            algorithm: algorithm, keyID: kid, claims: claims,
            identity: Identity(id: subject, kind: .jwt, issuer: settings.issuers.count > 1 ? issuer : nil)))
    }

    public var description: String {
        let algorithms = settings.algorithms.map(\.rawValue).sorted().joined(separator: ",")
        return "JWTVerifier(algorithms: \(algorithms), issuers: \(settings.issuers), audiences: \(settings.audiences), "
            + "skew: \(settings.skewSeconds)s, maxLifetime: \(settings.maxLifetimeSeconds)s, hmacSecret: \(hmacSecret == nil ? "none" : "<redacted>"), \(keys))"
    }
}
