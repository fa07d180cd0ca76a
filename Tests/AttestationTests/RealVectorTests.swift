import Attestation
import AttestationTestSupport
import Foundation
import Testing

/// Real attestations and an assertion from Apple devices (Fixtures/SOURCE.txt), through Apple's built-in root.
@Suite struct RealVectorTests {
    static let names = ["ios-14.4", "apple-2026"]

    func verifier(_ vector: RealVectors.Attestation, appIds: [String]? = nil, environment: AppAttestEnvironment? = nil) throws -> AppAttestVerifier {
        try AppAttestVerifier(appIds: appIds ?? ["OTHERTEAM.com.example.other", vector.appId], environment: environment ?? vector.environment)
    }

    func verify(_ vector: RealVectors.Attestation, object: [UInt8]? = nil, keyId: [UInt8]? = nil, clientDataHash: [UInt8]? = nil,
                at: Int64? = nil, appIds: [String]? = nil, environment: AppAttestEnvironment? = nil) throws -> Result<AppAttestKey, AppAttestFailure> {
        try verifier(vector, appIds: appIds, environment: environment)
            .verifyAttestation(object ?? vector.object, keyId: keyId ?? vector.keyId, clientDataHash: clientDataHash ?? vector.clientDataHash,
                               atUnixSeconds: at ?? vector.at)
    }

    @Test func builtInRootIsApplesAppAttestationRootCA() {
        let root = certificateDER(pem: Array(AppleAppAttestationRootCA.pem.utf8))
        let fingerprint = TestSHA256.digest(root).map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(fingerprint == "1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32")
    }

    @Test func builtInReceiptRootIsAppleRootCAG3() {
        let root = certificateDER(pem: Array(AppleRootCAG3.pem.utf8))
        let fingerprint = TestSHA256.digest(root).map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(fingerprint == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79")
    }

    /// The receipt is Apple's: another attestation's receipt (validly signed, same root) is refused.
    @Test func aReceiptFromAnotherAttestationIsRefused() throws {
        let ios14 = try CBORReader.decode(RealVectors.ios14.object)
        let apple2026 = try CBORReader.decode(RealVectors.apple2026.object)
        let otherReceipt = try #require(apple2026["attStmt"]?["receipt"])
        guard case .map(var entries) = ios14, let index = entries.firstIndex(where: { $0.key == .text("attStmt") }),
              case .map(var statement) = entries[index].value, let receiptIndex = statement.firstIndex(where: { $0.key == .text("receipt") })
        else { Issue.record("unexpected shape"); return }
        statement[receiptIndex].value = otherReceipt
        entries[index].value = .map(statement)
        let swapped = CBORWriter.encode(.map(entries))
        #expect(try verify(RealVectors.ios14, object: swapped) == .failure(AppAttestFailure(step: "receipt")))
        // The unchanged object, re-encoded by the test writer, still verifies: the failure is the receipt's.
        #expect(try verify(RealVectors.ios14, object: CBORWriter.encode(ios14)).map(\.keyId) == .success(RealVectors.ios14.keyId))
    }

    @Test(arguments: names) func verifiesAtItsTime(_ name: String) throws {
        let vector = RealVectors.named(name)
        let key = try verify(vector).get()
        #expect(key.keyId == vector.keyId)
        #expect(TestSHA256.digest(key.publicKey) == vector.keyId)
        #expect(key.appId == vector.appId)
        #expect(key.environment == vector.environment)
        #expect(key.counter == 0)
        #expect(key.receipt.count > 1000)
        if name == "ios-14.4" { #expect(key.publicKey == RealVectors.ios14PublicKey) }
    }

    @Test func theAppleSampleCarriesBytesAfterTheCOSEKeyWithoutTheEDFlag() throws {
        let object = try CBORReader.decode(RealVectors.apple2026.object)
        let authData = try #require(object["authData"]?.bytes)
        let parsed = try #require(AuthenticatorData.parseAttestation(authData))
        #expect(parsed.flags & 0x80 == 0)
        #expect(parsed.credential?.trailingByteCount == 62)
    }

    @Test(arguments: names) func failsWithTheWrongAppId(_ name: String) throws {
        let vector = RealVectors.named(name)
        #expect(try verify(vector, appIds: ["OTHERTEAM.com.example.other"]) == .failure(AppAttestFailure(step: "app_id")))
        // The team id is part of the app id.
        let bundle = vector.appId.split(separator: ".", maxSplits: 1)[1]
        #expect(try verify(vector, appIds: ["AAAAAAAAAA.\(bundle)"]) == .failure(AppAttestFailure(step: "app_id")))
    }

    @Test(arguments: names) func failsOutsideItsValidityWindow(_ name: String) throws {
        let vector = RealVectors.named(name)
        let outside = AppAttestFailure(step: "certificate_validity")
        #expect(try verify(vector, at: vector.leafNotBefore - 1) == .failure(outside))
        #expect(try verify(vector, at: vector.leafNotAfter + 1) == .failure(outside))
        #expect(try verify(vector, at: vector.leafNotBefore).map(\.keyId) == .success(vector.keyId))
        // OpenSSL counts notAfter itself as expired (X509_cmp_time); one second before it is inside.
        #expect(try verify(vector, at: vector.leafNotAfter - 1).map(\.keyId) == .success(vector.keyId))
        #expect(try verify(vector, at: 0) == .failure(outside))
        #expect(try verify(vector, at: 4_102_444_800) == .failure(outside)) // 2100
    }

    @Test(arguments: names) func failsWithTheOtherEnvironment(_ name: String) throws {
        let vector = RealVectors.named(name)
        let other: AppAttestEnvironment = vector.environment == .production ? .development : .production
        #expect(try verify(vector, environment: other) == .failure(AppAttestFailure(step: "aaguid")))
    }

    @Test(arguments: names) func failsWithAnotherKeyIdOrClientDataHash(_ name: String) throws {
        let vector = RealVectors.named(name)
        var keyId = vector.keyId
        keyId[31] ^= 1
        #expect(try verify(vector, keyId: keyId) == .failure(AppAttestFailure(step: "key_id")))
        #expect(try verify(vector, clientDataHash: vector.clientDataHash + [0]) == .failure(AppAttestFailure(step: "nonce")))
        #expect(try verify(vector, clientDataHash: []) == .failure(AppAttestFailure(step: "nonce")))
    }

    @Test(arguments: names) func failsUnderAnotherRoot(_ name: String) throws {
        let vector = RealVectors.named(name)
        let device = SoftwareAppAttestDevice()
        let verifier = try AppAttestVerifier(appIds: [vector.appId], environment: vector.environment, rootCAPEM: device.rootPEM)
        #expect(verifier.verifyAttestation(vector.object, keyId: vector.keyId, clientDataHash: vector.clientDataHash, atUnixSeconds: vector.at)
            == .failure(AppAttestFailure(step: "certificate_chain")))
    }

    @Test func theRealAssertionVerifies() {
        let result = AppAttestVerifier.verifyAssertion(RealVectors.ios14Assertion, clientDataHash: RealVectors.ios14.clientDataHash,
                                                       publicKey: RealVectors.ios14PublicKey, appId: RealVectors.ios14.appId)
        #expect(result == .success(1))
    }

    @Test func theRealAssertionFailsWithTheWrongAppIdKeyOrClientData() {
        let vector = RealVectors.ios14
        let assertion = RealVectors.ios14Assertion
        #expect(AppAttestVerifier.verifyAssertion(assertion, clientDataHash: vector.clientDataHash, publicKey: RealVectors.ios14PublicKey,
                                                  appId: "OTHERTEAM.de.vincent-haupert.apple-appattest-poc") == .failure(AppAttestFailure(step: "app_id")))
        #expect(AppAttestVerifier.verifyAssertion(assertion, clientDataHash: TestSHA256.digest(Array("wurzelpfropF".utf8)),
                                                  publicKey: RealVectors.ios14PublicKey, appId: vector.appId) == .failure(AppAttestFailure(step: "signature")))
        #expect(AppAttestVerifier.verifyAssertion(assertion, clientDataHash: vector.clientDataHash, publicKey: SoftwareAppAttestDevice().publicKey,
                                                  appId: vector.appId) == .failure(AppAttestFailure(step: "signature")))
    }
}

/// The DER of the first certificate in PEM text.
func certificateDER(pem: [UInt8]) -> [UInt8] {
    let text = String(decoding: pem, as: UTF8.self)
    let body = text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    return bytes(base64: body)
}
