// SecretMasker: the provider key never reaches the app in an error body, wherever the chunks split it.
import HTTP1
import Relay
import RelayCore
import RelayDev
import RelayState
import Testing

@Suite struct SecretMaskerTests {
    static let key = Array("sk-test-PROVIDERKEY-7f3a9c2e41d8b6".utf8)
    static let mask = Array("sk-".utf8) + Array(repeating: UInt8(ascii: "*"), count: key.count - 3)

    static func run(_ chunks: [[UInt8]], secret: [UInt8] = key) -> [UInt8] {
        var masker = SecretMasker(secret: secret)!
        var out: [UInt8] = []
        for chunk in chunks { out += chunk.withUnsafeBytes { masker.feed($0) } }
        return out + masker.finish()
    }

    static let body: [UInt8] = Array(#"{"error":{"message":"Incorrect API key provided: "#.utf8) + key
        + Array(#"; header was 'Bearer "#.utf8) + key + Array(#"'","code":"invalid_api_key"}} sk-tes s"#.utf8)
    static var expected: [UInt8] {
        Array(#"{"error":{"message":"Incorrect API key provided: "#.utf8) + mask
            + Array(#"; header was 'Bearer "#.utf8) + mask + Array(#"'","code":"invalid_api_key"}} sk-tes s"#.utf8)
    }

    @Test func masksEveryOccurrenceWithTheSameLength() {
        let out = Self.run([Self.body])
        #expect(out == Self.expected)
        #expect(out.count == Self.body.count)
    }

    @Test func masksAcrossEverySplitPosition() {
        for i in 0...Self.body.count {
            let out = Self.run([Array(Self.body[..<i]), Array(Self.body[i...])])
            #expect(out == Self.expected, "split at \(i)")
        }
    }

    @Test func masksAcrossEveryPairOfSplitPositions() {
        for i in stride(from: 0, through: Self.body.count, by: 3) {
            for j in i...Self.body.count {
                let out = Self.run([Array(Self.body[..<i]), Array(Self.body[i..<j]), Array(Self.body[j...])])
                #expect(out == Self.expected, "split at \(i), \(j)")
            }
        }
    }

    @Test func masksWhenFedOneByteAtATime() {
        #expect(Self.run(Self.body.map { [$0] }) == Self.expected)
    }

    @Test func nearMissesPassUnchanged() {
        let text = Array("sk-test-PROVIDERKEY-7f3a9c2e41d8b sk-test-PROVIDERKEY-7f3a9c2e41d8b7 ssk-test".utf8)
        #expect(Self.run([text]) == text)
        #expect(Self.run(text.map { [$0] }) == text)
    }

    @Test func overlappingStartsAreFound() {
        // A partial match that fails must not hide a real match starting inside it.
        let secret = Array("aab".utf8)
        #expect(Self.run([Array("aaab".utf8)], secret: secret) == Array("a***".utf8))
        #expect(Self.run([Array("aa".utf8), Array("ab".utf8)], secret: secret) == Array("a***".utf8))
    }

    @Test func onlyHeldBytesWaitAndOnlyWhileTheyCouldBeTheKey() {
        var masker = SecretMasker(secret: Self.key)!
        let first = Array("error: sk-te".utf8)
        #expect(first.withUnsafeBytes { masker.feed($0) } == Array("error: ".utf8))
        let second = Array("X and more".utf8)
        #expect(second.withUnsafeBytes { masker.feed($0) } == Array("sk-teX and more".utf8))
        #expect(masker.finish().isEmpty)
    }

    @Test func headerValuesAreMaskedAndUntouchedHeadersCostNoCopy() throws {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "X-Debug-Auth", value: "Bearer " + String(decoding: Self.key, as: UTF8.self))
        headers.add(name: "WWW-Authenticate", value: "Bearer error=\"invalid_token\"")
        let masked = try #require(SecretMasker.masking(headers, secret: Self.key))
        #expect(masked.first("X-Debug-Auth") == "Bearer " + String(decoding: Self.mask, as: UTF8.self))
        #expect(masked.first("Content-Type") == "application/json")
        #expect(masked.first("WWW-Authenticate") == "Bearer error=\"invalid_token\"")
        #expect(Array(masked).map(\.name) == ["Content-Type", "X-Debug-Auth", "WWW-Authenticate"])
        headers.remove("X-Debug-Auth")
        #expect(SecretMasker.masking(headers, secret: Self.key) == nil)
    }

    @Test func shortKeysAreMaskedWhole() {
        #expect(Self.run([Array("key=abc123;".utf8)], secret: Array("abc123".utf8)) == Array("key=******;".utf8))
        #expect(SecretMasker(secret: []) == nil)
    }
}
