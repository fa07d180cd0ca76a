// Base64url: round trips against Foundation, strict rejection, and no crash on any byte string.
import Auth
import Foundation
import Testing
import TestSupportCore

@Suite struct Base64URLTests {
    @Test func roundTripsEveryLengthAndMatchesFoundation() {
        var generator = SplitMix64(seed: 1)
        for length in 0..<80 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            let foundation = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(encoded == foundation)
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }

    /// Contiguous bytes are read in place, any other sequence is copied first: both give the same answers.
    @Test func sequencesWithoutContiguousStorageAgree() {
        var generator = SplitMix64(seed: 3)
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(bytes.lazy.map { $0 }.withContiguousStorageIfAvailable { _ in true } == nil)
            #expect(Base64URL.encode(bytes.lazy.map { $0 }) == encoded)
            #expect(Base64URL.decode(bytes: encoded.utf8.lazy.map { $0 }) == bytes)
            #expect(Base64URL.decode(bytes: Array(encoded.utf8)[...]) == bytes)
        }
        #expect(Base64URL.decode(bytes: "Zm9v!".utf8.lazy.map { $0 }) == nil)
        #expect(Base64URL.decode(bytes: "Zh".utf8.lazy.map { $0 }) == nil)
    }

    @Test func knownVectors() {
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("Zg") == Array("f".utf8))
        #expect(Base64URL.decode("Zm8") == Array("fo".utf8))
        #expect(Base64URL.decode("Zm9v") == Array("foo".utf8))
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test(arguments: ["Zg==", "Zm8=", "Z", "Zm9vY", "Zm 9v", "Zm9v\n", "+/+/", "Zm9v!", "Zh", "Zm9", "é", "\0\0"])
    func rejectsNonCanonicalOrForeignInput(_ text: String) {
        // Padding, impossible lengths, whitespace, standard-alphabet + and /, non-zero leftover bits ("Zh", "Zm9").
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func randomBytesNeverCrash() {
        var generator = SplitMix64(seed: 2)
        for _ in 0..<5000 {
            let length = Int.random(in: 0..<40, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if let decoded = Base64URL.decode(bytes: bytes) {
                #expect(Base64URL.encode(decoded) == String(decoding: bytes, as: UTF8.self))
            }
        }
    }
}
