import Attestation

/// A stand-in for Apple's App Attest PKI in tests: a root CA and an intermediate CA, both P-256, valid over
/// [`notBefore`, `notAfter`]. `rootPEM` is what a verifier (or `attestation.apple.rootCAFile`) trusts instead of
/// Apple's root.
package struct TestAppAttestCA: Sendable {
    package static let rootName = "Test App Attestation Root CA"
    package static let intermediateName = "Test App Attestation CA 1"

    package let rootKey: TestP256Key
    package let intermediateKey: TestP256Key
    package let root: [UInt8]
    package let intermediate: [UInt8]
    /// Signs receipts, as Apple's "Application Attestation Fraud Receipt Signing" certificate does, and carries its
    /// receipt-signer extension.
    package let receiptKey: TestP256Key
    package let receiptSigner: [UInt8]

    package init(notBefore: Int64, notAfter: Int64) {
        rootKey = TestP256Key()
        intermediateKey = TestP256Key()
        root = rootKey.certificate(subject: Self.rootName, issuer: rootKey, issuerName: Self.rootName, serial: 1,
                                   notBefore: notBefore, notAfter: notAfter, isCA: true)
        intermediate = intermediateKey.certificate(subject: Self.intermediateName, issuer: rootKey, issuerName: Self.rootName, serial: 2,
                                                   notBefore: notBefore, notAfter: notAfter, isCA: true)
        receiptKey = TestP256Key()
        receiptSigner = receiptKey.certificate(subject: "Test Receipt Signing", issuer: intermediateKey, issuerName: Self.intermediateName, serial: 4,
                                               notBefore: notBefore, notAfter: notAfter, isCA: false,
                                               extensionOID: AppAttestVerifier.receiptSignerExtensionOID, extensionValue: [0x05, 0x00])
    }

    /// A receipt as Apple's server makes it: CMS SignedData, signed by `receiptSigner` (carrying it and the
    /// intermediate), over a DER SET of SEQUENCE { type, version 1, OCTET STRING value } fields.
    package func receipt(fields: [(Int, [UInt8])], signer: (key: TestP256Key, certificate: [UInt8])? = nil) -> [UInt8] {
        (signer?.key ?? receiptKey).cmsSign(Self.receiptContent(fields), certificate: signer?.certificate ?? receiptSigner, chain: [intermediate])
    }

    /// The receipt's content: fields 2 (app id), 3 (leaf), 4 (client data hash), 6 ("ATTEST") and the like.
    package static func receiptContent(_ fields: [(Int, [UInt8])]) -> [UInt8] {
        let sequences = fields.map { type, value in
            DER.element(0x30, DER.element(0x02, [UInt8(type)]) + DER.element(0x02, [1]) + DER.element(0x04, value))
        }
        return DER.element(0x31, Array(sequences.joined()))
    }

    package var rootPEM: [UInt8] { testCertificatePEM(root) }

    /// A leaf (credCert) for `key`, issued by the intermediate, carrying `nonceExtension` as the value of
    /// 1.2.840.113635.100.8.2 (nil: no such extension).
    package func leaf(for key: TestP256Key, nonceExtension: [UInt8]?, notBefore: Int64, notAfter: Int64, serial: UInt64 = 3) -> [UInt8] {
        key.certificate(subject: AppAttestVerifierTestNames.leafSubject(key), issuer: intermediateKey, issuerName: Self.intermediateName,
                        serial: serial, notBefore: notBefore, notAfter: notAfter, isCA: false,
                        extensionOID: nonceExtension == nil ? nil : AppAttestVerifier.nonceExtensionOID, extensionValue: nonceExtension ?? [])
    }

    /// The DER value of Apple's nonce extension: SEQUENCE { [1] EXPLICIT OCTET STRING (32 bytes) }.
    package static func nonceExtension(_ nonce: [UInt8]) -> [UInt8] {
        precondition(nonce.count == 32)
        return [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + nonce
    }
}

enum AppAttestVerifierTestNames {
    /// Apple names the leaf after the key id in hex; so does the test CA (any name would verify).
    static func leafSubject(_ key: TestP256Key) -> String {
        TestSHA256.digest(key.publicPoint).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// DER tag-length-value writer for test data.
package enum DER {
    package static func element(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        let count = contents.count
        let length: [UInt8]
        switch count {
        case 0..<0x80: length = [UInt8(count)]
        case 0x80...0xFF: length = [0x81, UInt8(count)]
        default: length = [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        }
        return [tag] + length + contents
    }
}
