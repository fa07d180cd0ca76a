/// Why a request's credentials were refused: one case per failed check of RFC 6750 bearer extraction, RFC 7515
/// signature validation and RFC 7519 section 7.2 claim validation. Each case carries a short message that is safe
/// to send to the client and a stable machine-readable `code`; no case holds any part of the token, so an error
/// can be logged or returned as it is. Every case is a 401 for the client.
package enum AuthError: Error, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// No `Authorization: Bearer` credentials at all.
    case missing
    /// Not a compact JWS (three base64url segments of JSON), too long (over 16 KiB), not a bearer token, a
    /// registered claim of the wrong type, a `crit` header, or no `exp` claim.
    case malformed
    /// `alg` is not in the configured allowlist (`none` never is).
    case unsupportedAlgorithm
    /// No configured key for this `kid` and `alg` (or no `kid` while several keys could apply).
    case unknownKey
    case badSignature
    case expired
    case notYetValid
    case issuedInFuture
    /// `exp - iat` is longer than the configured maximum lifetime.
    case lifetimeTooLong
    /// No `iat`, so the token's lifetime cannot be bounded.
    case missingIssuedAt
    case wrongIssuer
    case wrongAudience
    case missingSubject
    /// A static token that matches none of the configured hashes.
    case unknownToken

    /// Stable identifier for the JSON error body and logs.
    package var code: String {
        switch self {
        case .missing: "token_missing"
        case .malformed: "token_malformed"
        case .unsupportedAlgorithm: "token_unsupported_algorithm"
        case .unknownKey: "token_unknown_key"
        case .badSignature: "token_bad_signature"
        case .expired: "token_expired"
        case .notYetValid: "token_not_yet_valid"
        case .issuedInFuture: "token_issued_in_future"
        case .lifetimeTooLong: "token_lifetime_too_long"
        case .missingIssuedAt: "token_missing_issued_at"
        case .wrongIssuer: "token_wrong_issuer"
        case .wrongAudience: "token_wrong_audience"
        case .missingSubject: "token_missing_subject"
        case .unknownToken: "token_unknown"
        }
    }

    /// One sentence for the client.
    package var message: String {
        switch self {
        case .missing: "The request has no bearer token."
        case .malformed: "The token is malformed."
        case .unsupportedAlgorithm: "The token's signing algorithm is not accepted."
        case .unknownKey: "The token was signed with an unknown key."
        case .badSignature: "The token's signature is invalid."
        case .expired: "The token has expired."
        case .notYetValid: "The token is not valid yet."
        case .issuedInFuture: "The token was issued in the future."
        case .lifetimeTooLong: "The token's lifetime is longer than this service accepts."
        case .missingIssuedAt: "The token has no issue time (iat)."
        case .wrongIssuer: "The token was issued by an issuer that is not accepted."
        case .wrongAudience: "The token is not meant for this service."
        case .missingSubject: "The token has no subject."
        case .unknownToken: "The token is not recognized."
        }
    }

    /// Value for the 401's `WWW-Authenticate` header (RFC 6750 section 3): no error attribute when the request
    /// carried no credentials, `invalid_token` otherwise.
    package var wwwAuthenticate: String {
        self == .missing ? "Bearer" : "Bearer error=\"invalid_token\""
    }

    package var description: String { code }
}

/// A problem in the authentication configuration (static token hashes; JWT settings per RFC 7519 section 7.2 and
/// RFC 7518 section 3.2), found when a `TokenAuthenticator` or `JWTVerifier` is built,
/// so a bad configuration stops start-up (or `--check-config`) instead of failing requests later. Messages name
/// the offending id or setting, never a secret or a hash.
package enum AuthConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    case emptyTokenID
    case duplicateTokenID(String)
    /// `sha256` is not 64 hexadecimal digits.
    case invalidTokenHash(id: String)
    /// Two ids share one hash, so the same token would be both.
    case duplicateTokenHash(id: String)
    case noAlgorithms
    case noIssuers
    case noAudiences
    case invalidSkew
    /// The maximum token lifetime is not a positive finite number of seconds.
    case invalidMaxLifetime
    /// An issuer contains "|", the separator of `issuer|sub` identities, so two identities could collide.
    case invalidIssuer(String)
    /// HS256 is allowed but no HMAC secret is configured.
    case missingHMACSecret
    /// The HS256 secret is shorter than 32 bytes (RFC 7518 section 3.2 requires at least the hash size).
    case hmacSecretTooShort

    package var description: String {
        switch self {
        case .emptyTokenID: "a static token has an empty id"
        case .duplicateTokenID(let id): "static token id \"\(id)\" appears more than once"
        case .invalidTokenHash(let id): "static token \"\(id)\": sha256 must be 64 hexadecimal digits"
        case .duplicateTokenHash(let id): "static token \"\(id)\" has the same hash as another id"
        case .noAlgorithms: "no JWT algorithm is allowed"
        case .noIssuers: "no JWT issuer is configured"
        case .noAudiences: "no JWT audience is configured"
        case .invalidSkew: "the clock skew must be a finite number of seconds, 0 or more"
        case .invalidMaxLifetime: "the maximum token lifetime must be a finite number of seconds, more than 0"
        case .invalidIssuer(let issuer): "JWT issuer \"\(issuer)\" must not contain \"|\""
        case .missingHMACSecret: "HS256 is allowed but no HMAC secret is configured"
        case .hmacSecretTooShort: "the HS256 secret must be at least 32 bytes"
        }
    }
}
