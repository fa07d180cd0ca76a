import Attestation

/// Fuzz target for App Attest input (libFuzzer, `make fuzz-cbor`; `relay-fuzz --cbor DIR` replays a corpus):
/// the CBOR reader, both authenticator data parsers, the receipt's DER reader, the nonce extension reader, and
/// the whole attestation and assertion verification, against the real iOS 14.4 vector's key and client data
/// (so mutations of the seed corpus get through the CBOR and into the certificate, nonce and authData checks).
///
/// Besides "never crash", each input checks: a whole decode and a prefix decode agree, a prefix decode consumes
/// at least one byte and no more than it was given, and a successful verification of the attestation returns
/// the key id it was asked about. A failed check is a crash on purpose: that is how libFuzzer reports a finding.
enum AttestationFuzzer {
    static let appId = "6MURL8TA57.de.vincent-haupert.apple-appattest-poc"
    /// SHA-256 of the vector's public key, and SHA-256("wurzelpfropf").
    static let keyId: [UInt8] = [98, 102, 201, 59, 140, 121, 156, 65, 212, 190, 119, 41, 247, 55, 86, 185, 86, 99, 52, 17, 12, 128, 153, 247,
                                 113, 212, 147, 160, 5, 208, 123, 115]
    static let clientDataHash: [UInt8] = [139, 230, 92, 202, 81, 90, 208, 151, 201, 83, 150, 125, 24, 214, 53, 216, 109, 215, 138, 20, 46, 211,
                                          208, 119, 82, 107, 237, 17, 198, 190, 198, 123]
    static let publicKey: [UInt8] = [4, 136, 192, 52, 161, 144, 170, 125, 188, 90, 6, 21, 1, 198, 84, 40, 3, 148, 37, 130, 25, 139, 63, 28,
                                     197, 70, 115, 202, 59, 154, 210, 11, 65, 82, 130, 103, 165, 79, 95, 219, 160, 70, 159, 175, 180, 107,
                                     182, 153, 10, 57, 107, 240, 79, 148, 164, 157, 67, 32, 200, 28, 122, 178, 64, 163, 152]
    /// 2021-01-23T12:13:33Z, inside the vector's validity.
    static let at: Int64 = 1_611_404_013
    static let verifier = try! AppAttestVerifier(appIds: [appId], environment: .development)

    static func run(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)

        let whole = try? CBORReader.decode(bytes)
        if let (value, consumed) = try? CBORReader.decodePrefix(bytes[...]) {
            precondition(consumed >= 1 && consumed <= bytes.count, "prefix decode consumed \(consumed) of \(bytes.count)")
            precondition((consumed == bytes.count) == (whole != nil), "whole and prefix decode disagree")
            if let whole { precondition(whole == value, "whole and prefix decode give different values") }
        } else {
            precondition(whole == nil, "a whole decode succeeded where the prefix decode failed")
        }

        if let data = AuthenticatorData.parseAssertion(bytes) {
            precondition(data.rpIdHash.count == 32)
        }
        if let data = AuthenticatorData.parseAttestation(bytes) {
            precondition(data.credential != nil && data.credential!.aaguid.count == 16)
            precondition(data.credential!.credentialId.count <= AuthenticatorData.maxCredentialIdLength)
        }
        _ = AppAttestReceiptFields(content: bytes)
        if let nonce = AppAttestVerifier.nonceFromExtension(bytes) { precondition(nonce.count == 32) }

        if case .success(let key) = verifier.verifyAttestation(bytes, keyId: keyId, clientDataHash: clientDataHash, atUnixSeconds: at) {
            precondition(key.keyId == keyId && key.publicKey == publicKey, "an attestation verified for another key")
        }
        _ = AppAttestVerifier.verifyAssertion(bytes, clientDataHash: clientDataHash, publicKey: publicKey, appId: appId)
    }
}
