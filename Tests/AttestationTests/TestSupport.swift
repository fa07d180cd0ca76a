import Attestation
import AttestationTestSupport
import Foundation

enum Fixtures {
    static func text(_ name: String) -> String {
        let url = Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil)!
        return String(decoding: try! Data(contentsOf: url), as: UTF8.self)
    }

    static func base64(_ name: String) -> [UInt8] { bytes(base64: text(name).trimmingCharacters(in: .whitespacesAndNewlines)) }
}

func bytes(base64: String) -> [UInt8] { Array(Data(base64Encoded: base64)!) }

func bytes(hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        out.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return out
}

/// The real vectors (see Fixtures/SOURCE.txt).
enum RealVectors {
    struct Attestation {
        var object: [UInt8]
        var appId: String
        var keyId: [UInt8]
        var clientDataHash: [UInt8]
        var environment: AppAttestEnvironment
        var at: Int64
        var leafNotBefore: Int64
        var leafNotAfter: Int64
    }

    static func named(_ name: String) -> Attestation { name == "ios-14.4" ? ios14 : apple2026 }

    static let ios14 = Attestation(
        object: Fixtures.base64("ios-14.4-attestation.b64"),
        appId: "6MURL8TA57.de.vincent-haupert.apple-appattest-poc",
        keyId: bytes(base64: "YmbJO4x5nEHUvncp9zdWuVZjNBEMgJn3cdSToAXQe3M="),
        clientDataHash: TestSHA256.digest(Array("wurzelpfropf".utf8)),
        environment: .development,
        at: 1_611_404_013, // 2021-01-23T12:13:33Z
        leafNotBefore: 1_611_317_615, // 2021-01-22T12:13:35Z
        leafNotAfter: 1_611_576_815) // 2021-01-25T12:13:35Z

    /// The public key of the iOS 14.4 vector, from the SubjectPublicKeyInfo in ios-14.4.yaml (its last 65 bytes).
    static let ios14PublicKey = Array(bytes(base64: "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEiMA0oZCqfbxaBhUBxlQoA5QlghmLPxzFRnPKO5rSC0FSgmelT1/boEafr7RrtpkKOWvwT5SknUMgyBx6skCjmA==").suffix(65))

    static let ios14Assertion = Fixtures.base64("ios-14.4-assertion.b64")

    static let apple2026 = Attestation(
        object: Fixtures.base64("apple-2026-attestation.b64"),
        appId: "1234567890.com.example.myapp",
        keyId: bytes(hex: "ce0498f58483fbb4da0d7b2c63a5a538f552d4adcb9a4fa916195c49613e655d"),
        clientDataHash: Array("example_server_challenge".utf8),
        environment: .production,
        at: 1_776_729_600, // 2026-04-21T00:00:00Z
        leafNotBefore: 1_776_708_792, // 2026-04-20T18:13:12Z
        leafNotAfter: 1_776_967_992) // 2026-04-23T18:13:12Z
}
