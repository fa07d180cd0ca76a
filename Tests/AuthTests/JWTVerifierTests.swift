// JWT verification: valid tokens of each algorithm and every refusal, with claims set relative to a fixed `now`.
import Auth
import Foundation
import Support
import Testing
import TestSupportCore

@Suite struct ValidTokenTests {
    @Test func validHS256() throws {
        let verified = try #require(value(verifier().verify(hs256(), now: now)))
        #expect(verified.algorithm == .hs256)
        #expect(verified.identity == Identity(id: "user-42", kind: .jwt, issuer: issuer))
        #expect(verified.claims["email"] == .string("someone@example.com"))
    }

    @Test func validRS256WithEachKid() throws {
        let verified = try #require(value(verifier().verify(rs256(), now: now)))
        #expect(verified.algorithm == .rs256)
        #expect(verified.keyID == "rsa-1")
        #expect(verified.subject == "user-42")
        #expect(verified.issuer == issuer)
        #expect(verified.audiences == [audience])
        #expect(verified.expiresAt == now + 600)
        #expect(verified.notBefore == now - 10)
        #expect(verified.issuedAt == now - 10)
        #expect(value(verifier().verify(rs256(kid: "rsa-2", key: Fixtures.rsa2), now: now))?.keyID == "rsa-2")
    }

    @Test func validES256() throws {
        let verified = try #require(value(verifier().verify(es256(), now: now)))
        #expect(verified.algorithm == .es256)
        #expect(verified.keyID == "ec-1")
        // Many signatures: r or s with leading zero bytes must survive the r||s <-> DER conversion.
        for index in 0..<200 {
            #expect(value(verifier().verify(es256(["n": index]), now: now)) != nil)
        }
    }

    @Test func optionalClaimsAndAudienceArrays() throws {
        let bare = rs256(["nbf": NSNull(), "aud": ["someone-else", "second-app"]])
        let verified = try #require(value(verifier().verify(bare, now: now)))
        #expect(verified.notBefore == nil)
        #expect(verified.issuedAt == now - 10)
        #expect(verified.audiences == ["someone-else", "second-app"])
        #expect(value(verifier().verify(rs256(["iss": "https://other-issuer.example"]), now: now)) != nil)
    }

    @Test func aSecretTokenVerifies() {
        #expect(value(verifier().verify(Secret(rs256()), now: now)) != nil)
    }

    @Test func headerToIdentityEndToEnd() {
        let result = BearerToken.extract(authorization: "Bearer " + es256())
            .flatMap { verifier().verify($0, now: now) }
            .map(\.identity)
        #expect(value(result)?.id == "user-42")
    }
}

@Suite struct AlgorithmAndKeyTests {
    @Test(arguments: ["none", "None", "NONE", "nOnE"])
    func algNoneIsNeverAccepted(_ alg: String) {
        let unsigned = Base64URL.encode(Array(header(alg).utf8)) + "." + Base64URL.encode(Array(claims().utf8)) + "."
        #expect(failure(verifier().verify(unsigned, now: now)) == .unsupportedAlgorithm)
        // Even with a signature segment, and even with every algorithm allowed: none has no JWTAlgorithm case.
        #expect(failure(verifier().verify(token(header: header(alg), payload: claims(), signer: .secret), now: now)) == .unsupportedAlgorithm)
        #expect(JWTAlgorithm(rawValue: alg) == nil)
    }

    @Test(arguments: ["HS384", "HS512", "RS384", "RS512", "PS256", "ES384", "ES512", "EdDSA", "hs256", "rs256", ""])
    func otherAlgorithmsAreUnsupported(_ alg: String) {
        #expect(failure(verifier().verify(token(header: header(alg), payload: claims(), signer: .secret), now: now)) == .unsupportedAlgorithm)
    }

    @Test func algorithmsOutsideTheAllowlistAreUnsupported() {
        #expect(failure(verifier([.rs256]).verify(es256(), now: now)) == .unsupportedAlgorithm)
        #expect(failure(verifier([.rs256]).verify(hs256(), now: now)) == .unsupportedAlgorithm)
        #expect(failure(verifier([.es256, .hs256]).verify(rs256(), now: now)) == .unsupportedAlgorithm)
        #expect(value(verifier([.rs256]).verify(rs256(), now: now)) != nil)
    }

    @Test func hs256SignedWithTheRSAPublicKeyIsRefused() {
        // The classic confusion attack: HMAC keyed with the verifier's public RSA key (PEM text or modulus bytes).
        let pem = Array(Fixtures.text("rsa-1.pub.pem").utf8)
        let n = Base64URL.decode(Fixtures.member("rsa-1")["n"] as! String)!
        for key in [pem, n, Array(Fixtures.text("jwks.json").utf8)] {
            let forged = token(header: header("HS256", kid: "rsa-1"), payload: claims(), signer: .hs256(key: key))
            // Only RSA keys allowed: HS256 is simply not an option.
            let rsaOnly = verifier([.rs256], keys: try! Fixtures.jwks([Fixtures.member("rsa-1")]))
            #expect(failure(rsaOnly.verify(forged, now: now)) == .unsupportedAlgorithm)
            // HS256 allowed too: it is checked with the configured secret only, never with a JWKS key.
            #expect(failure(verifier().verify(forged, now: now)) == .badSignature)
        }
    }

    @Test func theKeyTypeMustFitTheAlgorithm() {
        // An RS256 token naming the EC key's kid, and an ES256 token naming an RSA kid: no key of that type.
        let rsWithECKid = token(header: header("RS256", kid: "ec-1"), payload: claims(), signer: .rs256(Fixtures.rsa1))
        #expect(failure(verifier().verify(rsWithECKid, now: now)) == .unknownKey)
        let esWithRSAKid = token(header: header("ES256", kid: "rsa-1"), payload: claims(), signer: .es256(Fixtures.ec1))
        #expect(failure(verifier().verify(esWithRSAKid, now: now)) == .unknownKey)
        // An ES256 header over an RSA signature (and the reverse) with matching kids: bad signature.
        let esHeaderRSASig = token(header: header("ES256", kid: "ec-1"), payload: claims(), signer: .rs256(Fixtures.rsa1))
        #expect(failure(verifier().verify(esHeaderRSASig, now: now)) == .badSignature)
        let rsHeaderECSig = token(header: header("RS256", kid: "rsa-1"), payload: claims(), signer: .es256(Fixtures.ec1))
        #expect(failure(verifier().verify(rsHeaderECSig, now: now)) == .badSignature)
    }

    @Test func unknownKid() {
        #expect(failure(verifier().verify(rs256(kid: "rsa-9"), now: now)) == .unknownKey)
        #expect(failure(verifier().verify(es256(kid: "EC-1"), now: now)) == .unknownKey)
        #expect(failure(verifier(keys: .empty).verify(rs256(), now: now)) == .unknownKey)
        #expect(failure(verifier().verify(token(header: header("RS256", kid: "rsa-1", extra: ["kid": 7]), payload: claims(), signer: .rs256(Fixtures.rsa1)), now: now)) == .malformed)
    }

    @Test func aTokenWithoutKidNeedsExactlyOneKeyOfItsType() throws {
        // Decision: no kid + several keys for the algorithm = unknownKey (no trying every key); one key = that key.
        #expect(failure(verifier().verify(rs256(kid: nil), now: now)) == .unknownKey) // rsa-1 and rsa-2
        #expect(value(verifier().verify(es256(kid: nil), now: now)) != nil) // ec-1 is the only EC key
        let oneRSA = try Fixtures.jwks([Fixtures.member("rsa-1"), Fixtures.member("ec-1")])
        #expect(value(verifier(keys: oneRSA).verify(rs256(kid: nil), now: now)) != nil)
        #expect(failure(verifier(keys: oneRSA).verify(rs256(kid: nil, key: Fixtures.rsa2), now: now)) == .badSignature)
    }

    @Test func aKeyWithoutKidOnlyMatchesKidlessTokens() throws {
        var member = Fixtures.member("rsa-1")
        member["kid"] = nil
        let keys = try Fixtures.jwks([member])
        #expect(value(verifier(keys: keys).verify(rs256(kid: nil), now: now)) != nil)
        #expect(failure(verifier(keys: keys).verify(rs256(kid: "rsa-1"), now: now)) == .unknownKey)
    }

    @Test func signedByAnotherKey() {
        #expect(failure(verifier().verify(rs256(kid: "rsa-1", key: Fixtures.rsa2), now: now)) == .badSignature)
        #expect(failure(verifier().verify(hs256(signer: .hs256(key: Array("another-secret-of-at-least-32-bytes!".utf8))), now: now)) == .badSignature)
    }
}

@Suite struct TamperingTests {
    private func segments(_ token: String) -> [String] { token.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }

    @Test(arguments: ["HS256", "RS256", "ES256"])
    func tamperedPayloadHeaderAndSignature(_ alg: String) {
        let original = switch alg {
        case "HS256": hs256()
        case "RS256": rs256()
        default: es256()
        }
        #expect(value(verifier().verify(original, now: now)) != nil)
        let parts = segments(original)
        let kid: String? = alg == "HS256" ? nil : (alg == "RS256" ? "rsa-1" : "ec-1")

        let otherPayload = Base64URL.encode(Array(claims(["sub": "admin"]).utf8))
        #expect(failure(verifier().verify([parts[0], otherPayload, parts[2]].joined(separator: "."), now: now)) == .badSignature)

        let otherHeader = Base64URL.encode(Array(header(alg, kid: kid, extra: ["typ": "at+jwt"]).utf8))
        #expect(failure(verifier().verify([otherHeader, parts[1], parts[2]].joined(separator: "."), now: now)) == .badSignature)

        var signature = Base64URL.decode(parts[2])!
        for position in [0, signature.count / 2, signature.count - 1] {
            var flipped = signature
            flipped[position] ^= 0x01
            #expect(failure(verifier().verify([parts[0], parts[1], Base64URL.encode(flipped)].joined(separator: "."), now: now)) == .badSignature)
        }
        signature.removeLast()
        #expect(failure(verifier().verify([parts[0], parts[1], Base64URL.encode(signature)].joined(separator: "."), now: now)) == .badSignature)
        signature += [0, 0]
        #expect(failure(verifier().verify([parts[0], parts[1], Base64URL.encode(signature)].joined(separator: "."), now: now)) == .badSignature)
        // A signature segment that is not canonical base64url.
        #expect(failure(verifier().verify([parts[0], parts[1], parts[2] + "="].joined(separator: "."), now: now)) == .malformed)
    }

    /// Two readers of one token must see the same claims: a claim or header name given twice is refused (RFC 7515
    /// section 5.2), not read as its first or last copy; so are nesting past the reader's depth cap and a payload
    /// that is not one JSON object.
    @Test func duplicateNamesDeepNestingAndNonObjectsAreMalformed() {
        let valid = claims()
        let twice = String(valid.dropLast()) + #","sub":"admin"}"#
        #expect(failure(verifier().verify(token(header: header("RS256", kid: "rsa-1"), payload: twice, signer: .rs256(Fixtures.rsa1)), now: now)) == .malformed)
        let headerTwice = String(header("RS256", kid: "rsa-1").dropLast()) + #","alg":"none"}"#
        #expect(failure(verifier().verify(token(header: headerTwice, payload: valid, signer: .rs256(Fixtures.rsa1)), now: now)) == .malformed)
        let deep = String(valid.dropLast()) + #","x":"# + String(repeating: "[", count: 200) + String(repeating: "]", count: 200) + "}"
        #expect(failure(verifier().verify(token(header: header("RS256", kid: "rsa-1"), payload: deep, signer: .rs256(Fixtures.rsa1)), now: now)) == .malformed)
        for payload in [valid + " 1", "[" + valid + "]", "\u{FEFF}" + valid] {
            #expect(failure(verifier().verify(token(header: header("RS256", kid: "rsa-1"), payload: payload, signer: .rs256(Fixtures.rsa1)), now: now)) == .malformed)
        }
        #expect(failure(verifier().verify(token(header: header("RS256", kid: "rsa-1"), payload: valid, signer: .rs256(Fixtures.rsa1)), now: now)) == nil)
    }

    @Test func anAllZeroECDSASignatureIsRefused() {
        let zero = token(header: header("ES256", kid: "ec-1"), payload: claims(), signer: .raw([UInt8](repeating: 0, count: 64)))
        #expect(failure(verifier().verify(zero, now: now)) == .badSignature)
        let ones = token(header: header("ES256", kid: "ec-1"), payload: claims(), signer: .raw([UInt8](repeating: 0xFF, count: 64)))
        #expect(failure(verifier().verify(ones, now: now)) == .badSignature)
    }
}

@Suite struct ClaimTests {
    @Test func expiryBoundaries() {
        // Accepted while now < exp + skew (RFC 7519 section 4.1.4 with leeway).
        #expect(failure(verifier().verify(rs256(["exp": now - skew - 1]), now: now)) == .expired)
        #expect(failure(verifier().verify(rs256(["exp": now - skew]), now: now)) == .expired)
        #expect(value(verifier().verify(rs256(["exp": now - skew + 1]), now: now)) != nil)
        #expect(value(verifier().verify(rs256(["exp": now]), now: now)) != nil)
        #expect(value(verifier().verify(rs256(["exp": now + 0.5]), now: now)) != nil)
        // Without skew, exp == now is already expired.
        #expect(failure(verifier(skew: 0).verify(rs256(["exp": now]), now: now)) == .expired)
        #expect(value(verifier(skew: 0).verify(rs256(["exp": now + 1]), now: now)) != nil)
        #expect(failure(verifier().verify(rs256(), now: .nan)) == .expired)
    }

    @Test func notBeforeBoundaries() {
        #expect(value(verifier().verify(rs256(["nbf": now + skew]), now: now)) != nil)
        #expect(failure(verifier().verify(rs256(["nbf": now + skew + 1]), now: now)) == .notYetValid)
        #expect(failure(verifier(skew: 0).verify(rs256(["nbf": now + 1]), now: now)) == .notYetValid)
        #expect(value(verifier(skew: 0).verify(rs256(["nbf": now]), now: now)) != nil)
    }

    @Test func issuedAtBoundaries() {
        #expect(value(verifier().verify(rs256(["iat": now + skew]), now: now)) != nil)
        #expect(failure(verifier().verify(rs256(["iat": now + skew + 1]), now: now)) == .issuedInFuture)
        // An old iat is fine as long as the token's whole lifetime (exp - iat) stays within the maximum.
        #expect(value(verifier(maxLifetime: 86_400 * 366).verify(rs256(["iat": now - 86_400 * 365]), now: now)) != nil)
    }

    @Test func lifetimeBoundaries() {
        // Default 24 h: exp - iat == 86400 passes, one second more does not (exp stays in the future throughout).
        #expect(JWTVerifier.Settings(algorithms: [.rs256], issuers: [issuer], audiences: [audience]).maxLifetimeSeconds == 86_400)
        #expect(value(verifier().verify(rs256(["iat": now - 100, "exp": now - 100 + 86_400]), now: now)) != nil)
        #expect(failure(verifier().verify(rs256(["iat": now - 100, "exp": now - 100 + 86_401]), now: now)) == .lifetimeTooLong)
        #expect(failure(verifier().verify(rs256(["iat": now - 86_400 * 365]), now: now)) == .lifetimeTooLong)
        // A 10-year token minted a second ago: fresh, validly signed, and still refused.
        #expect(failure(verifier().verify(rs256(["iat": now - 1, "exp": now + 86_400 * 3650]), now: now)) == .lifetimeTooLong)
        // A configured maximum, to the second; skew does not stretch it (both ends come from the token).
        let hour = verifier(maxLifetime: 3600)
        #expect(value(hour.verify(rs256(["iat": now - 10, "exp": now + 3590]), now: now)) != nil)
        #expect(failure(hour.verify(rs256(["iat": now - 10, "exp": now + 3590.5]), now: now)) == .lifetimeTooLong)
        #expect(failure(hour.verify(rs256(["iat": now - 10, "exp": now + 3591]), now: now)) == .lifetimeTooLong)
    }

    @Test func aTokenWithoutIssuedAtIsRefused() {
        // Its lifetime cannot be bounded; every issuer we document (Firebase, Apple, Auth0, Cognito) sets iat.
        #expect(failure(verifier().verify(rs256(["iat": NSNull()]), now: now)) == .missingIssuedAt)
        #expect(failure(verifier().verify(hs256(["iat": NSNull(), "nbf": NSNull()]), now: now)) == .missingIssuedAt)
        #expect(failure(verifier(maxLifetime: 366 * 86_400).verify(es256(["iat": NSNull()]), now: now)) == .missingIssuedAt)
    }

    @Test func registeredClaimsOfTheWrongTypeAreMalformed() {
        #expect(failure(verifier().verify(rs256(["exp": NSNull()]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["exp": "\(Int(now) + 600)"]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["exp": true]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["nbf": "0"]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["iat": [1]]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["iss": 1]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["aud": [audience, 1]]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["aud": ["x": audience]]), now: now)) == .malformed)
        #expect(failure(verifier().verify(rs256(["sub": 42]), now: now)) == .malformed)
    }

    @Test func issuerMustMatchExactly() {
        for wrong in ["https://evil.example", issuer + "/", issuer.uppercased(), "", " " + issuer] {
            #expect(failure(verifier().verify(rs256(["iss": wrong]), now: now)) == .wrongIssuer)
        }
        #expect(failure(verifier().verify(rs256(["iss": NSNull()]), now: now)) == .wrongIssuer)
    }

    @Test func audienceAsStringAndArray() {
        #expect(failure(verifier().verify(rs256(["aud": "other-app"]), now: now)) == .wrongAudience)
        #expect(failure(verifier().verify(rs256(["aud": "Relay-App"]), now: now)) == .wrongAudience)
        #expect(failure(verifier().verify(rs256(["aud": ["other-app", "third-app"]]), now: now)) == .wrongAudience)
        #expect(failure(verifier().verify(rs256(["aud": [String]()]), now: now)) == .wrongAudience)
        #expect(failure(verifier().verify(rs256(["aud": NSNull()]), now: now)) == .wrongAudience)
        #expect(value(verifier().verify(rs256(["aud": ["other-app", audience]]), now: now)) != nil)
        #expect(value(verifier().verify(rs256(["aud": "second-app"]), now: now)) != nil)
    }

    @Test func subjectMustBeANonEmptyString() {
        #expect(failure(verifier().verify(rs256(["sub": NSNull()]), now: now)) == .missingSubject)
        #expect(failure(verifier().verify(rs256(["sub": ""]), now: now)) == .missingSubject)
    }

    @Test func theSignatureIsCheckedBeforeAnyClaim() {
        // An expired token with a bad signature reports the signature.
        let expired = rs256(["exp": now - 3600], key: Fixtures.rsa2)
        #expect(failure(verifier().verify(expired, now: now)) == .badSignature)
    }
}

@Suite struct MalformedInputTests {
    @Test(arguments: ["", ".", "..", "...", "a.b", "a.b.c.d", "a..c", ".b.c", "a.b.", "eyJ.eyJ.sig", "a.b.c", "ey J.a.b",
                      "🙂.🙂.🙂", "Bearer x.y.z", "\0.\0.\0"])
    func garbageIsRefused(_ text: String) {
        let error = failure(verifier().verify(text, now: now))
        #expect(error == (text.isEmpty ? .missing : .malformed))
    }

    @Test func structurallyBrokenHeadersAndPayloads() {
        let b64 = { (text: String) in Base64URL.encode(Array(text.utf8)) }
        let sig = Base64URL.encode([1, 2, 3])
        let payload = b64(claims())
        for badHeader in ["", "[]", "\"RS256\"", "{", "{}", "{\"alg\":null}", "{\"alg\":256}", "{\"alg\":[\"RS256\"]}", "null", "1"] {
            #expect(failure(verifier().verify("\(b64(badHeader)).\(payload).\(sig)", now: now)) == .malformed)
        }
        // crit: no extension is understood, so it is refused outright.
        let crit = token(header: header("RS256", kid: "rsa-1", extra: ["crit": ["exp"]]), payload: claims(), signer: .rs256(Fixtures.rsa1))
        #expect(failure(verifier().verify(crit, now: now)) == .malformed)
        // JWE (five segments) is not a JWS.
        #expect(failure(verifier().verify("a.b.c.d.e", now: now)) == .malformed)
        // A correctly signed payload that is not a JSON object.
        for badPayload in ["", "[]", "not json", "\"text\"", "{\"exp\":1e400}"] {
            let signed = token(header: header("RS256", kid: "rsa-1"), payload: badPayload, signer: .rs256(Fixtures.rsa1))
            #expect(failure(verifier().verify(signed, now: now)) == .malformed)
        }
    }

    @Test func deeplyNestedJSONDoesNotCrash() {
        let nested = String(repeating: "[", count: 12_000)
        let deepHeader = "{\"alg\":\"RS256\",\"x\":" + nested + "}"
        let forged = Base64URL.encode(Array(deepHeader.utf8)) + ".e30.AQID"
        #expect(failure(verifier().verify(forged, now: now)) == .malformed)
        let deepPayload = token(header: header("HS256"), payload: "{\"a\":" + String(repeating: "{\"a\":", count: 2000) + "1" + String(repeating: "}", count: 2001), signer: .secret)
        #expect(failure(verifier().verify(deepPayload, now: now)) == .malformed)
    }

    @Test func tokensOver16KiBAreMalformedBeforeAnyWork() {
        let padding = String(repeating: "x", count: 17 * 1024)
        let huge = rs256(["pad": padding])
        #expect(huge.utf8.count > JWTVerifier.maxTokenBytes)
        #expect(failure(verifier().verify(huge, now: now)) == .malformed)
        let justUnder = rs256(["pad": String(repeating: "x", count: 11_000)])
        #expect(justUnder.utf8.count <= JWTVerifier.maxTokenBytes)
        #expect(value(verifier().verify(justUnder, now: now)) != nil)
        #expect(failure(verifier().verify(String(repeating: ".", count: 1 << 20), now: now)) == .malformed)
    }

    @Test func randomBytesNeverCrash() {
        var generator = SplitMix64(seed: 3)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/".utf8)
        let valid = rs256()
        for round in 0..<3000 {
            let length = Int.random(in: 0..<300, using: &generator)
            var bytes: [UInt8]
            switch round % 3 {
            case 0: bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            case 1: bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            default:
                // A valid token with a few random byte changes.
                bytes = Array(valid.utf8)
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if text == valid { continue }
            #expect(value(verifier().verify(text, now: now)) == nil)
        }
    }
}

@Suite struct VerifierConfigurationTests {
    @Test func impossibleSettingsAreRefused() {
        let secret = Secret(hmacSecretText)
        #expect(throws: AuthConfigurationError.noAlgorithms) {
            try JWTVerifier(settings: settings([]), keys: Fixtures.jwks)
        }
        #expect(throws: AuthConfigurationError.noIssuers) {
            try JWTVerifier(settings: .init(algorithms: [.rs256], issuers: [], audiences: [audience]))
        }
        #expect(throws: AuthConfigurationError.noAudiences) {
            try JWTVerifier(settings: .init(algorithms: [.rs256], issuers: [issuer], audiences: []))
        }
        #expect(throws: AuthConfigurationError.invalidSkew) {
            try JWTVerifier(settings: settings([.rs256], skew: -1))
        }
        #expect(throws: AuthConfigurationError.invalidSkew) {
            try JWTVerifier(settings: settings([.rs256], skew: .infinity))
        }
        for bad in [0, -1, Double.nan, .infinity] {
            #expect(throws: AuthConfigurationError.invalidMaxLifetime) {
                try JWTVerifier(settings: settings([.rs256], maxLifetime: bad))
            }
        }
        #expect(throws: AuthConfigurationError.invalidIssuer("https://a.example|b")) {
            try JWTVerifier(settings: .init(algorithms: [.rs256], issuers: [issuer, "https://a.example|b"], audiences: [audience]))
        }
        #expect(throws: AuthConfigurationError.missingHMACSecret) {
            try JWTVerifier(settings: settings([.hs256]))
        }
        #expect(throws: AuthConfigurationError.missingHMACSecret) {
            try JWTVerifier(settings: settings([.hs256]), hmacSecret: Secret(""))
        }
        #expect(throws: AuthConfigurationError.hmacSecretTooShort) {
            try JWTVerifier(settings: settings([.hs256]), hmacSecret: Secret(String(repeating: "s", count: 31)))
        }
        #expect(throws: Never.self) {
            _ = try JWTVerifier(settings: settings([.hs256]), hmacSecret: Secret(String(repeating: "s", count: 32)))
            _ = try JWTVerifier(settings: settings([.rs256]), hmacSecret: secret) // unused secret: allowed, ignored
        }
    }

    @Test func anIgnoredSecretNeverVerifies() throws {
        // A secret given while HS256 is not allowed is dropped: HS256 tokens stay unsupported.
        let rsOnly = try JWTVerifier(settings: settings([.rs256]), hmacSecret: Secret(hmacSecretText), keys: Fixtures.jwks)
        #expect(failure(rsOnly.verify(hs256(), now: now)) == .unsupportedAlgorithm)
    }

    @Test func replacingKeys() {
        let empty = verifier(keys: .empty)
        #expect(failure(empty.verify(rs256(), now: now)) == .unknownKey)
        #expect(value(empty.replacingKeys(Fixtures.jwks).verify(rs256(), now: now)) != nil)
        #expect(value(empty.replacingKeys(Fixtures.jwks).verify(hs256(), now: now)) != nil)
    }
}

/// RFC 7519 section 4.1.2: `sub` is unique only within its issuer. With several issuers accepted, the identity (the
/// key rate limits count by) is `issuer|sub`, so two issuers' users never share a budget.
@Suite struct IssuerQualifiedIdentityTests {
    static let other = "https://other-issuer.example"

    @Test func severalIssuersQualifyTheSubject() throws {
        let a = try #require(value(verifier().verify(rs256(), now: now))).identity
        let b = try #require(value(verifier().verify(rs256(["iss": Self.other]), now: now))).identity
        #expect(a == Identity(id: "user-42", kind: .jwt, issuer: issuer))
        #expect(a.key == "jwt:\(issuer)|user-42")
        #expect(b.key == "jwt:\(Self.other)|user-42")
        #expect(a.key != b.key)
        #expect("\(a)" == a.key)
    }

    @Test func oneIssuerKeepsTheBareSubject() throws {
        let single = try JWTVerifier(settings: .init(algorithms: [.rs256], issuers: [issuer], audiences: [audience]), keys: Fixtures.jwks)
        let identity = try #require(value(single.verify(rs256(), now: now))).identity
        #expect(identity == Identity(id: "user-42", kind: .jwt))
        #expect(identity.key == "jwt:user-42")
    }

    @Test func aSubjectWithTheSeparatorCannotImpersonateAnotherIssuer() throws {
        // Issuers cannot contain "|", so the first "|" always ends the issuer: no (iss, sub) pair can spell
        // another pair's key.
        let crafted = try #require(value(verifier().verify(rs256(["iss": Self.other, "sub": "x|user-42"]), now: now))).identity
        let plain = try #require(value(verifier().verify(rs256(), now: now))).identity
        #expect(crafted.key == "jwt:\(Self.other)|x|user-42")
        #expect(crafted.key != plain.key)
    }

    @Test func staticTokenKeys() {
        #expect(Identity(id: "ios-app", kind: .staticToken).key == "static:ios-app")
    }
}
