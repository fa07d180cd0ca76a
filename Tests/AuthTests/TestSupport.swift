// Fixture keys, in-process token signing through the COpenSSL shim, and claim builders.
import Auth
import COpenSSL
import Foundation
import Support
import Testing

/// Fixed wall-clock time of every test (seconds since 1970).
let now: Double = 1_700_000_000
let skew: Double = 60
let issuer = "https://issuer.example/project-1"
let audience = "relay-app"
let hmacSecretText = "an-hs256-secret-that-is-at-least-32-bytes-long"

enum Fixtures {
    static func data(_ name: String) -> Data {
        let url = Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil)!
        return try! Data(contentsOf: url)
    }

    static func text(_ name: String) -> String { String(decoding: data(name), as: UTF8.self) }

    static let rsa1 = PrivateKey(pem: text("rsa-1.pem"))
    static let rsa2 = PrivateKey(pem: text("rsa-2.pem"))
    static let ec1 = PrivateKey(pem: text("ec-1.pem"))
    static let jwksData = data("jwks.json")
    static let jwks = try! JWKSet(json: jwksData)

    /// The fixture JWKS members as JSON objects, to build variants of the set.
    static func members() -> [[String: Any]] {
        let object = try! JSONSerialization.jsonObject(with: jwksData) as! [String: Any]
        return object["keys"] as! [[String: Any]]
    }

    static func member(_ kid: String) -> [String: Any] { members().first { $0["kid"] as? String == kid }! }

    static func jwks(_ members: [[String: Any]]) throws(JWKSError) -> JWKSet {
        try JWKSet(json: try! JSONSerialization.data(withJSONObject: ["keys": members]))
    }
}

/// A private key for signing test tokens.
final class PrivateKey: @unchecked Sendable {
    // @unchecked Sendable invariant: `pointer` is set once, never mutated, freed in deinit; OpenSSL allows
    // concurrent signing with a key that is not modified, and each sign uses its own EVP_MD_CTX.
    let pointer: OpaquePointer

    init(pem: String) {
        let bytes = Array(pem.utf8)
        pointer = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { cossl_private_key_from_pem($0.baseAddress, $0.count) }
        }!
    }

    deinit { cossl_key_free(pointer) }

    func signRS256(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 1024)
        let count = cossl_sign_rs256(pointer, message, message.count, &out, out.count)
        precondition(count > 0)
        return Array(out[0..<count])
    }

    func signES256(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        precondition(cossl_sign_es256(pointer, message, message.count, &out) == 1)
        return out
    }
}

enum Signer {
    case hs256(key: [UInt8])
    case rs256(PrivateKey)
    case es256(PrivateKey)
    /// A fixed signature, whatever the input.
    case raw([UInt8])

    static let secret = Signer.hs256(key: Array(hmacSecretText.utf8))

    func sign(_ input: [UInt8]) -> [UInt8] {
        switch self {
        case .hs256(let key):
            var out = [UInt8](repeating: 0, count: 32)
            precondition(cossl_hmac_sha256(key, key.count, input, input.count, &out) == 1)
            return out
        case .rs256(let key): return key.signRS256(input)
        case .es256(let key): return key.signES256(input)
        case .raw(let bytes): return bytes
        }
    }
}

func json(_ object: [String: Any]) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
}

/// A JWS compact token from raw header and payload JSON texts.
func token(header: String, payload: String, signer: Signer) -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
    return input + "." + Base64URL.encode(signer.sign(Array(input.utf8)))
}

/// Standard claims valid at `now`, with overrides; a value of NSNull removes the claim.
func claims(_ overrides: [String: Any] = [:]) -> String {
    var claims: [String: Any] = [
        "iss": issuer, "aud": audience, "sub": "user-42",
        "exp": now + 600, "nbf": now - 10, "iat": now - 10, "email": "someone@example.com",
    ]
    for (key, value) in overrides {
        if value is NSNull { claims[key] = nil } else { claims[key] = value }
    }
    return json(claims)
}

func header(_ alg: String, kid: String? = nil, extra: [String: Any] = [:]) -> String {
    var object: [String: Any] = ["alg": alg, "typ": "JWT"]
    if let kid { object["kid"] = kid }
    for (key, value) in extra { object[key] = value }
    return json(object)
}

func rs256(_ overrides: [String: Any] = [:], kid: String? = "rsa-1", key: PrivateKey = Fixtures.rsa1) -> String {
    token(header: header("RS256", kid: kid), payload: claims(overrides), signer: .rs256(key))
}

func es256(_ overrides: [String: Any] = [:], kid: String? = "ec-1") -> String {
    token(header: header("ES256", kid: kid), payload: claims(overrides), signer: .es256(Fixtures.ec1))
}

func hs256(_ overrides: [String: Any] = [:], signer: Signer = .secret) -> String {
    token(header: header("HS256"), payload: claims(overrides), signer: signer)
}

func settings(_ algorithms: Set<JWTAlgorithm> = Set(JWTAlgorithm.allCases), skew: Double = skew,
              maxLifetime: Double = JWTVerifier.Settings.defaultMaxLifetimeSeconds) -> JWTVerifier.Settings {
    JWTVerifier.Settings(algorithms: algorithms, issuers: [issuer, "https://other-issuer.example"],
                         audiences: [audience, "second-app"], skewSeconds: skew, maxLifetimeSeconds: maxLifetime)
}

func verifier(_ algorithms: Set<JWTAlgorithm> = Set(JWTAlgorithm.allCases), keys: JWKSet = Fixtures.jwks,
              skew: Double = skew, maxLifetime: Double = JWTVerifier.Settings.defaultMaxLifetimeSeconds) -> JWTVerifier {
    let secret = algorithms.contains(.hs256) ? Secret(hmacSecretText) : nil
    return try! JWTVerifier(settings: settings(algorithms, skew: skew, maxLifetime: maxLifetime), hmacSecret: secret, keys: keys)
}

func failure<T>(_ result: Result<T, AuthError>) -> AuthError? {
    if case .failure(let error) = result { return error }
    return nil
}

func value<T>(_ result: Result<T, AuthError>) -> T? {
    if case .success(let value) = result { return value }
    return nil
}
