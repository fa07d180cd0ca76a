/// The JWS algorithms SSE Relay accepts (RFC 7518 section 3.1). `none` and every other name have no case, so
/// they can never be allowlisted: a token naming them is always `unsupportedAlgorithm`.
package enum JWTAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// HMAC with SHA-256 under the configured shared secret (RFC 7518 section 3.2).
    case hs256 = "HS256"
    /// RSASSA-PKCS1-v1_5 with SHA-256, RSA public key from the JWKS (RFC 7518 section 3.3).
    case rs256 = "RS256"
    /// ECDSA P-256 with SHA-256, EC public key from the JWKS (RFC 7518 section 3.4).
    case es256 = "ES256"
}
