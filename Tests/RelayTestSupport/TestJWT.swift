// Test support: JWTs signed with the test key set in Tests/AuthTests/Fixtures (App Check tokens, user tokens).
import Auth
import COpenSSL
import Foundation

/// The test key files (`rsa-1.pem`, `rsa-2.pem`, `ec-1.pem`) and their public set (`jwks.json`).
package let testKeyFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("AuthTests/Fixtures")

/// The public keys of the test key files.
package func testJWKS() -> JWKSet {
    try! JWKSet(json: Data(contentsOf: testKeyFixtures.appendingPathComponent("jwks.json")))
}

/// A compact JWS of `claims` signed with the private key in `keyFile` under `alg` (`RS256` or `ES256`), the
/// header naming `kid`.
package func signedTestJWT(_ claims: [String: Any], alg: String = "RS256", kid: String = "rsa-1", keyFile: String = "rsa-1.pem") -> String {
    func b64(_ object: [String: Any]) -> String {
        Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }
    let input = b64(["alg": alg, "typ": "JWT", "kid": kid]) + "." + b64(claims)
    let pem = Array(try! String(contentsOf: testKeyFixtures.appendingPathComponent(keyFile), encoding: .utf8).utf8)
    let key = pem.withUnsafeBufferPointer { b in b.withMemoryRebound(to: CChar.self) { cossl_private_key_from_pem($0.baseAddress, $0.count) } }!
    defer { cossl_key_free(key) }
    let message = Array(input.utf8)
    var signature = [UInt8](repeating: 0, count: 1024)
    let count = alg == "ES256" ? (cossl_sign_es256(key, message, message.count, &signature) == 1 ? 64 : 0)
                               : cossl_sign_rs256(key, message, message.count, &signature, signature.count)
    precondition(count > 0, "signing failed")
    return input + "." + Base64URL.encode(signature[0..<count])
}

/// A Firebase App Check token for project `123456789012` as Firebase mints them (`aud` an array), claims
/// overridden (NSNull removes one).
package func testAppCheckToken(_ overrides: [String: Any] = [:], now: Double, alg: String = "RS256", kid: String = "rsa-1",
                              keyFile: String = "rsa-1.pem") -> String {
    var claims: [String: Any] = ["iss": "https://firebaseappcheck.googleapis.com/123456789012",
                                 "aud": ["projects/123456789012", "projects/demo-app"], "sub": "1:123456789012:ios:0a1b2c3d4e5f",
                                 "exp": now + 3600, "iat": now - 10]
    for (k, v) in overrides { if v is NSNull { claims[k] = nil } else { claims[k] = v } }
    return signedTestJWT(claims, alg: alg, kid: kid, keyFile: keyFile)
}
