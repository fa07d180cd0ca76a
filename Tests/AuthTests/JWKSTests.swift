// JWKS parsing: usable RSA/P-256 keys are kept, everything else is skipped with a reason.
import Auth
import Foundation
import Testing
import TestSupportCore

@Suite struct JWKSTests {
    @Test func theFixtureSetParses() {
        let set = Fixtures.jwks
        #expect(set.keys.map(\.keyID) == ["rsa-1", "rsa-2", "ec-1"])
        #expect(set.keys.map(\.algorithm) == [.rs256, .rs256, .es256])
        #expect(set.keys.map(\.bits) == [2048, 2048, 256])
        #expect(set.skipped.isEmpty)
        #expect(String(describing: set).contains("rsa-1 RS256 2048 bits"))
    }

    @Test func unusableKeysAreSkippedAndTheRestKept() throws {
        let rsa = Fixtures.member("rsa-1")
        let ec = Fixtures.member("ec-1")
        func variant(_ base: [String: Any], _ kid: String, _ changes: [String: Any?]) -> [String: Any] {
            var member = base
            member["kid"] = kid
            for (key, value) in changes { member[key] = value }
            return member
        }
        var offCurve = Base64URL.decode(ec["y"] as! String)!
        offCurve[31] ^= 1
        let shortModulus = Base64URL.encode([0x80] + [UInt8](repeating: 0x11, count: 126) + [0x01]) // 1024 bits
        let members: [[String: Any]] = [
            variant(rsa, "enc", ["use": "enc"]),
            variant(rsa, "ops", ["key_ops": ["encrypt"]]),
            variant(rsa, "rs384", ["alg": "RS384"]),
            variant(rsa, "rsa-as-es", ["alg": "ES256"]),
            variant(rsa, "hs", ["alg": "HS256"]),
            variant(rsa, "small", ["n": shortModulus]),
            variant(rsa, "bad-n", ["n": "not base64url!"]),
            variant(rsa, "no-e", ["e": nil]),
            variant(rsa, "even-e", ["e": Base64URL.encode([2])]),
            ["kty": "oct", "kid": "oct", "k": Base64URL.encode(Array(hmacSecretText.utf8))],
            ["kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": Base64URL.encode([UInt8](repeating: 1, count: 32))],
            variant(ec, "p384", ["crv": "P-384"]),
            variant(ec, "short-x", ["x": Base64URL.encode([UInt8](repeating: 1, count: 31))]),
            variant(ec, "off-curve", ["y": Base64URL.encode(offCurve)]),
            variant(ec, "ec-as-rs", ["alg": "RS256"]),
            ["kid": "no-kty", "n": rsa["n"]!, "e": "AQAB"],
            variant(rsa, "kid-number", ["kid": 5]),
            variant(rsa, "ok-rsa", ["key_ops": ["verify"]]),
            variant(ec, "ok-ec", ["use": "sig", "alg": nil, "d": "ignored-private-part"]),
        ]
        var document = try JSONSerialization.jsonObject(with: JSONSerialization.data(withJSONObject: ["keys": members])) as! [String: Any]
        document["keys"] = (document["keys"] as! [Any]) + ["not an object"]
        let set = try JWKSet(json: JSONSerialization.data(withJSONObject: document))
        #expect(set.keys.map(\.keyID) == ["ok-rsa", "ok-ec"])
        #expect(Set(set.skipped.compactMap(\.keyID)) == [
            "enc", "ops", "rs384", "rsa-as-es", "hs", "small", "bad-n", "no-e", "even-e", "oct", "ed", "p384",
            "short-x", "off-curve", "ec-as-rs", "no-kty",
        ])
        #expect(set.skipped.count == members.count - 2 + 1)
        #expect(set.skipped.first { $0.keyID == "small" }?.reason == "RSA modulus under 2048 bits")
        #expect(set.skipped.first { $0.keyID == "off-curve" }?.reason == "x, y is not a point on P-256")
        // The surviving keys verify.
        let keys = set
        #expect(value(verifier(keys: keys).verify(rs256(kid: "ok-rsa"), now: now)) != nil)
        #expect(value(verifier(keys: keys).verify(es256(kid: "ok-ec"), now: now)) != nil)
        #expect(failure(verifier(keys: keys).verify(rs256(kid: "enc"), now: now)) == .unknownKey)
    }

    @Test func documentsWithoutUsableKeysThrow() {
        #expect(throws: JWKSError.notJSON) { try JWKSet(json: Data("garbage".utf8)) }
        #expect(throws: JWKSError.notJSON) { try JWKSet(json: Data()) }
        #expect(throws: JWKSError.notJSON) { try JWKSet(json: Data("[{\"keys\":[]}]".utf8)) }
        #expect(throws: JWKSError.noKeysArray) { try JWKSet(json: Data("{\"keys\":{}}".utf8)) }
        #expect(throws: JWKSError.noKeysArray) { try JWKSet(json: Data("{}".utf8)) }
        #expect(throws: JWKSError.noUsableKeys(skipped: [])) { try JWKSet(json: Data("{\"keys\":[]}".utf8)) }
        let error = #expect(throws: JWKSError.self) {
            try JWKSet(json: Data("{\"keys\":[{\"kty\":\"oct\",\"kid\":\"x\",\"k\":\"AAAA\"}]}".utf8))
        }
        if case .noUsableKeys(let skipped)? = error {
            #expect(skipped.map(\.description) == ["x: kty oct is not supported"])
        } else {
            Issue.record("expected noUsableKeys, got \(String(describing: error))")
        }
        let big = Data("{\"keys\":[],\"pad\":\"".utf8) + Data(repeating: 0x61, count: JWKSet.maxDocumentBytes) + Data("\"}".utf8)
        #expect(throws: JWKSError.tooLarge) { try JWKSet(json: big) }
    }

    @Test func randomDocumentsNeverCrash() {
        var generator = SplitMix64(seed: 4)
        let original = Array(Fixtures.jwksData)
        for _ in 0..<2000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            _ = try? JWKSet(json: Data(bytes))
        }
    }
}
