// Nothing that describes an input, a result or an error contains the token, its signature or a secret.
import Auth
import Foundation
import Support
import Testing

@Suite struct SecrecyTests {
    private func texts(_ value: Any) -> [String] {
        [String(describing: value), String(reflecting: value), "\(value)", dumped(value)]
    }

    private func expectClean(_ value: Any, of token: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let parts = token.split(separator: ".").map(String.init).filter { $0.count >= 8 }
        for text in texts(value) {
            #expect(!text.contains(token), sourceLocation: sourceLocation)
            for part in parts { #expect(!text.contains(part), sourceLocation: sourceLocation) }
            #expect(!text.contains(hmacSecretText), sourceLocation: sourceLocation)
        }
    }

    @Test func resultsAndErrorsNeverContainTheToken() {
        let tokens = [
            hs256(), rs256(), es256(), rs256(["exp": now - 3600]), rs256(["nbf": now + 3600]), rs256(["iat": now + 3600]),
            rs256(["iss": "x"]), rs256(["aud": "x"]), rs256(["sub": ""]), rs256(kid: "nope"), rs256(key: Fixtures.rsa2),
            hs256(signer: .hs256(key: Array("wrong-secret-wrong-secret-wrong-secret".utf8))), "abc.def.ghi-jkl-mno",
            token(header: header("none"), payload: claims(), signer: .secret), String(repeating: "a", count: 20_000),
        ]
        var seen = Set<AuthError>()
        for token in tokens {
            let result = verifier().verify(token, now: now)
            expectClean(result, of: token)
            if case .failure(let error) = result {
                seen.insert(error)
                expectClean(error, of: token)
                #expect("\(error)" == error.code)
            }
            let bearer = BearerToken.extract(authorization: "Bearer " + token)
            expectClean(bearer, of: token)
            if case .success(let secret) = bearer {
                expectClean(secret, of: token)
                expectClean(verifier().verify(secret, now: now), of: token)
            }
        }
        #expect(seen == [.expired, .notYetValid, .issuedInFuture, .wrongIssuer, .wrongAudience, .missingSubject,
                         .unknownKey, .badSignature, .malformed, .unsupportedAlgorithm])
    }

    @Test func theVerifierNeverShowsItsSecret() {
        for text in texts(verifier()) {
            #expect(!text.contains(hmacSecretText))
        }
        #expect(String(describing: verifier()).contains("hmacSecret: <redacted>"))
    }

    @Test func everyErrorHasAStableCodeAndAClientMessage() {
        let codes = AuthError.allCases.map(\.code)
        #expect(Set(codes).count == AuthError.allCases.count)
        #expect(codes.allSatisfy { $0.hasPrefix("token_") && $0.allSatisfy { $0.isLowercase || $0 == "_" } })
        #expect(AuthError.allCases.allSatisfy { $0.message.hasSuffix(".") && $0.message.count < 80 })
        #expect(AuthError.expired.code == "token_expired")
        #expect(AuthError.expired.message == "The token has expired.")
        #expect(AuthError.unknownToken.code == "token_unknown")
        #expect(AuthError.missing.wwwAuthenticate == "Bearer")
        #expect(AuthError.badSignature.wwwAuthenticate == "Bearer error=\"invalid_token\"")
    }
}
