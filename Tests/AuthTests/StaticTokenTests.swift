// Static bearer tokens: SHA-256 hashes in the configuration, the id as identity, header extraction.
import Auth
import COpenSSL
import Foundation
import Support
import Testing

private func sha256Hex(_ text: String) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    let bytes = Array(text.utf8)
    precondition(cossl_sha256(bytes, bytes.count, &digest) == 1)
    return digest.map { String(format: "%02x", $0) }.joined()
}

private let iosToken = "ios-4f6b1c8e9a0d2e7f"
private let androidToken = "android-77aa01bb02cc03dd"

@Suite struct StaticTokenTests {
    let authenticator = try! TokenAuthenticator(tokens: [
        (id: "ios-app", sha256Hex: sha256Hex(iosToken)),
        (id: "android-app", sha256Hex: sha256Hex(androidToken).uppercased()),
    ])

    @Test func theRightTokenGivesItsID() {
        #expect(value(authenticator.authenticate(bearer: iosToken)) == Identity(id: "ios-app", kind: .staticToken))
        #expect(value(authenticator.authenticate(bearer: Secret(androidToken)))?.id == "android-app")
        #expect(authenticator.tokenIDs == ["ios-app", "android-app"])
    }

    @Test func aWrongTokenIsUnknown() {
        #expect(failure(authenticator.authenticate(bearer: iosToken + "x")) == .unknownToken)
        #expect(failure(authenticator.authenticate(bearer: String(iosToken.dropLast()))) == .unknownToken)
        #expect(failure(authenticator.authenticate(bearer: sha256Hex(iosToken))) == .unknownToken)
        #expect(failure(authenticator.authenticate(bearer: "")) == .missing)
        #expect(failure(authenticator.authenticate(bearer: String(repeating: "a", count: 16 * 1024 + 1))) == .malformed)
    }

    @Test func everyPositionOfManyHashesMatches() throws {
        // All hashes are compared on every call; whichever position holds the match, it is found.
        let tokens = (0..<40).map { "token-\($0)-\(String(repeating: "z", count: $0))" }
        let many = try TokenAuthenticator(tokens: tokens.enumerated().map { (id: "id-\($0.offset)", sha256Hex: sha256Hex($0.element)) })
        for (index, token) in tokens.enumerated() {
            #expect(value(many.authenticate(bearer: token))?.id == "id-\(index)")
        }
        #expect(failure(many.authenticate(bearer: "token-40")) == .unknownToken)
        let none = try TokenAuthenticator(tokens: [])
        #expect(failure(none.authenticate(bearer: iosToken)) == .unknownToken)
    }

    @Test func configurationErrors() {
        let good = sha256Hex("x")
        #expect(throws: AuthConfigurationError.invalidTokenHash(id: "a")) {
            try TokenAuthenticator(tokens: [(id: "a", sha256Hex: "abc")])
        }
        #expect(throws: AuthConfigurationError.invalidTokenHash(id: "a")) {
            try TokenAuthenticator(tokens: [(id: "a", sha256Hex: String(good.dropLast()) + "g")])
        }
        #expect(throws: AuthConfigurationError.invalidTokenHash(id: "a")) {
            try TokenAuthenticator(tokens: [(id: "a", sha256Hex: good + "00")])
        }
        #expect(throws: AuthConfigurationError.emptyTokenID) {
            try TokenAuthenticator(tokens: [(id: "", sha256Hex: good)])
        }
        #expect(throws: AuthConfigurationError.duplicateTokenID("a")) {
            try TokenAuthenticator(tokens: [(id: "a", sha256Hex: good), (id: "a", sha256Hex: sha256Hex("y"))])
        }
        #expect(throws: AuthConfigurationError.duplicateTokenHash(id: "b")) {
            try TokenAuthenticator(tokens: [(id: "a", sha256Hex: good), (id: "b", sha256Hex: good.uppercased())])
        }
    }

    @Test func theDescriptionShowsIDsOnly() {
        for text in [String(describing: authenticator), String(reflecting: authenticator), dumped(authenticator)] {
            #expect(text.contains("ios-app"))
            #expect(!text.contains(iosToken))
            #expect(!text.contains(sha256Hex(iosToken)))
            #expect(!text.contains(String(sha256Hex(iosToken).prefix(16))))
        }
    }

    @Test func bearerExtraction() {
        #expect(value(BearerToken.extract(authorization: "Bearer abc.DEF-_~+/=="))?.revealForHeader() == "abc.DEF-_~+/==")
        #expect(value(BearerToken.extract(authorization: "bearer   abc "))?.revealForHeader() == "abc")
        #expect(value(BearerToken.extract(authorization: "BEARER abc"))?.revealForHeader() == "abc")
        #expect(failure(BearerToken.extract(authorization: nil)) == .missing)
        #expect(failure(BearerToken.extract(authorization: "")) == .missing)
        #expect(failure(BearerToken.extract(authorization: "Bearer")) == .missing)
        #expect(failure(BearerToken.extract(authorization: "Bearer   ")) == .missing)
        #expect(failure(BearerToken.extract(authorization: "Basic dXNlcjpwYXNz")) == .missing)
        #expect(failure(BearerToken.extract(authorization: "Bearerabc")) == .missing)
        #expect(failure(BearerToken.extract(authorization: "Bearer a b")) == .malformed)
        #expect(failure(BearerToken.extract(authorization: "Bearer =abc")) == .malformed)
        #expect(failure(BearerToken.extract(authorization: "Bearer a=b")) == .malformed)
        #expect(failure(BearerToken.extract(authorization: "Bearer tökén")) == .malformed)
        #expect(failure(BearerToken.extract(authorization: "Bearer " + String(repeating: "a", count: 16 * 1024 + 1))) == .malformed)
        #expect(value(BearerToken.extract(authorization: "Bearer " + String(repeating: "a", count: 16 * 1024))) != nil)
    }

    @Test func headerToIdentityEndToEnd() {
        let result = BearerToken.extract(authorization: "Bearer \(iosToken)").flatMap(authenticator.authenticate(bearer:))
        #expect(value(result)?.id == "ios-app")
    }
}

func dumped(_ value: Any) -> String {
    var text = ""
    dump(value, to: &text)
    return text
}
