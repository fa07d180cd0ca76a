import Foundation

/// One usable public signing key from a JWKS (RFC 7517 section 4): an RSA key (RFC 7518 section 6.3, `n`/`e`)
/// for RS256 or a P-256 key (RFC 7518 section 6.2, `x`/`y`) for ES256. The algorithm follows from the key type,
/// never from the token, so a key can only ever verify its own algorithm.
package struct JWK: Sendable, CustomStringConvertible {
    /// `kid`, matched exactly against the token header's `kid`.
    package let keyID: String?
    package let algorithm: JWTAlgorithm
    /// RSA modulus size, or 256 for P-256.
    package let bits: Int
    let key: PublicKey

    package var description: String { "\(keyID ?? "(no kid)") \(algorithm.rawValue) \(bits) bits" }
}

/// A member of a JWK Set that cannot be used (RFC 7517 section 5: such members are ignored), and why, for the
/// operator's log.
package struct SkippedKey: Sendable, Hashable, CustomStringConvertible {
    package let keyID: String?
    package let reason: String
    package var description: String { "\(keyID ?? "(no kid)"): \(reason)" }
}

/// Why a JWKS document (RFC 7517 section 5) gave no key set.
package enum JWKSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Larger than `JWKSet.maxDocumentBytes`.
    case tooLarge
    /// Not a JSON object.
    case notJSON
    /// No `keys` array (RFC 7517 section 5.1).
    case noKeysArray
    /// Every key was unusable (or there were none).
    case noUsableKeys(skipped: [SkippedKey])

    package var description: String {
        switch self {
        case .tooLarge: "the JWKS document is larger than \(JWKSet.maxDocumentBytes) bytes"
        case .notJSON: "the JWKS document is not a JSON object"
        case .noKeysArray: "the JWKS document has no \"keys\" array"
        case .noUsableKeys(let skipped):
            skipped.isEmpty ? "the JWKS document has no keys"
                : "the JWKS document has no usable key (\(skipped.map(\.description).joined(separator: "; ")))"
        }
    }
}

/// The public keys that verify RS256 and ES256 tokens, parsed from a JWK Set document (RFC 7517 section 5).
/// Unusable members are skipped, not fatal, as RFC 7517 section 5 asks: unknown `kty` (including symmetric
/// `oct` keys, which never belong in a published set), `use` other than `sig`, `key_ops` without `verify`, an
/// `alg` other than RS256/ES256 or one that does not fit the key type, curves other than P-256, coordinates that
/// are not 32 bytes or not on the curve, RSA moduli under 2048 or over 8192 bits, and malformed base64url.
package struct JWKSet: Sendable, CustomStringConvertible {
    package static let maxDocumentBytes = 1 << 20
    /// Members beyond this many are skipped (bounds the work one document can cause).
    package static let maxKeys = 64

    package let keys: [JWK]
    /// Members that were not usable, with the reason.
    package let skipped: [SkippedKey]

    /// No keys: for a verifier that only uses HS256, or before the first JWKS arrives.
    package static let empty = JWKSet(keys: [], skipped: [])

    package var isEmpty: Bool { keys.isEmpty }

    /// These keys and `other`'s: a key file's set with the set its URL serves (`jwksFile` and `jwksURL` together).
    package func adding(_ other: JWKSet) -> JWKSet {
        other.isEmpty ? self : JWKSet(keys: keys + other.keys, skipped: skipped + other.skipped)
    }

    init(keys: [JWK], skipped: [SkippedKey]) {
        self.keys = keys
        self.skipped = skipped
    }

    /// Throws unless the document is a JWK Set with at least one usable key.
    package init(json: Data) throws(JWKSError) {
        guard json.count <= Self.maxDocumentBytes else { throw .tooLarge }
        guard let document = JSONValue.parseObject(Array(json)) else { throw .notJSON }
        guard case .array(let members)? = document["keys"] else { throw .noKeysArray }
        var keys: [JWK] = []
        var skipped: [SkippedKey] = []
        for (index, member) in members.enumerated() {
            guard case .object(let fields) = member else {
                skipped.append(SkippedKey(keyID: nil, reason: "not a JSON object"))
                continue
            }
            let kid = fields["kid"]?.stringValue
            if index >= Self.maxKeys {
                skipped.append(SkippedKey(keyID: kid, reason: "more than \(Self.maxKeys) keys in the set"))
                continue
            }
            switch Self.parseKey(fields) {
            case .success(let jwk): keys.append(jwk)
            case .failure(let reason): skipped.append(SkippedKey(keyID: kid, reason: reason.text))
            }
        }
        guard !keys.isEmpty else { throw .noUsableKeys(skipped: skipped) }
        self.keys = keys
        self.skipped = skipped
    }

    /// Keys that can verify `algorithm` for a token with header `kid`: with a kid, every key with that exact kid
    /// and the algorithm's key type; without one, the single key of that type, or none when several could apply
    /// (guessing would let a kid-less token be tried against every key).
    func candidates(for algorithm: JWTAlgorithm, kid: String?) -> [JWK] {
        let fitting = keys.filter { $0.algorithm == algorithm }
        if let kid { return fitting.filter { $0.keyID == kid } }
        return fitting.count == 1 ? fitting : []
    }

    package var description: String {
        "JWKSet(\(keys.count) keys: [\(keys.map(\.description).joined(separator: ", "))], \(skipped.count) skipped)"
    }

    private struct Reason: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    private static func parseKey(_ fields: [String: JSONValue]) -> Result<JWK, Reason> {
        let kid: String?
        switch fields["kid"] {
        case nil: kid = nil
        case .string(let value)?: kid = value
        default: return .failure(Reason("kid is not a string"))
        }
        guard let kty = fields["kty"]?.stringValue else { return .failure(Reason("no kty")) }
        if let use = fields["use"] {
            guard use.stringValue == "sig" else { return .failure(Reason("use is not \"sig\"")) }
        }
        if let ops = fields["key_ops"] {
            guard case .array(let list) = ops, list.contains(.string("verify")) else {
                return .failure(Reason("key_ops does not include \"verify\""))
            }
        }
        let declared: JWTAlgorithm?
        switch fields["alg"] {
        case nil: declared = nil
        case .string(let name)?:
            guard let algorithm = JWTAlgorithm(rawValue: name), algorithm != .hs256 else {
                return .failure(Reason("alg \(name.prefix(32)) is not supported"))
            }
            declared = algorithm
        default: return .failure(Reason("alg is not a string"))
        }
        switch kty {
        case "RSA":
            if let declared, declared != .rs256 { return .failure(Reason("alg does not fit kty RSA")) }
            guard let n = fields["n"]?.stringValue.flatMap(Base64URL.decode),
                  let e = fields["e"]?.stringValue.flatMap(Base64URL.decode) else {
                return .failure(Reason("n or e missing or not base64url"))
            }
            let modulus = n.drop { $0 == 0 }
            guard modulus.count >= 256 else { return .failure(Reason("RSA modulus under 2048 bits")) }
            guard modulus.count <= 1024 else { return .failure(Reason("RSA modulus over 8192 bits")) }
            guard e.count <= 8, let key = PublicKey.rsa(n: Array(modulus), e: e) else {
                return .failure(Reason("n and e are not an RSA public key"))
            }
            guard key.bits >= 2048 else { return .failure(Reason("RSA modulus under 2048 bits")) }
            return .success(JWK(keyID: kid, algorithm: .rs256, bits: key.bits, key: key))
        case "EC":
            if let declared, declared != .es256 { return .failure(Reason("alg does not fit kty EC")) }
            guard fields["crv"]?.stringValue == "P-256" else { return .failure(Reason("crv is not P-256")) }
            guard let x = fields["x"]?.stringValue.flatMap(Base64URL.decode),
                  let y = fields["y"]?.stringValue.flatMap(Base64URL.decode),
                  x.count == 32, y.count == 32 else {
                return .failure(Reason("x or y missing, not base64url, or not 32 bytes"))
            }
            guard let key = PublicKey.p256(x: x, y: y) else { return .failure(Reason("x, y is not a point on P-256")) }
            return .success(JWK(keyID: kid, algorithm: .es256, bits: 256, key: key))
        default:
            return .failure(Reason("kty \(kty.prefix(32)) is not supported"))
        }
    }
}
