internal import COpenSSL
import Attestation

/// SHA-256 for test support (the verifier's own helper is internal to Attestation, on purpose: a test device
/// that shared the verifier's code could share its bugs).
package enum TestSHA256 {
    package static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { cossl_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        precondition(ok == 1)
        return out
    }
}

/// What to break in an attestation object the software device builds; the defaults build a valid one.
package struct AttestationTampering: Sendable {
    package var fmt = "apple-appattest"
    /// The aaguid written into authData; nil: the device's environment's.
    package var aaguid: [UInt8]?
    package var counter: UInt32 = 0
    /// Flags byte of authData; nil: 0x40 (AT).
    package var flags: UInt8?
    /// The credential id in authData; nil: the key id.
    package var credentialId: [UInt8]?
    /// Whose SHA-256 goes into rpIdHash; nil: the app id asked for.
    package var rpId: String?
    /// The nonce the leaf certifies; nil: SHA-256(authData ‖ clientDataHash), as Apple computes it.
    package var certifiedNonce: [UInt8]?
    /// Leave the nonce extension out of the leaf.
    package var omitNonceExtension = false
    /// The key the leaf certifies; nil: the device's key (a different key makes SHA-256(leaf key) ≠ key id).
    package var certifiedKey: TestP256Key?
    /// The COSE key in authData; nil: the device key's (EC2, ES256, P-256).
    package var coseKey: CBORValue?
    /// Bytes appended after the COSE key, without the ED flag (iOS 27 appends a CBOR map there).
    package var bytesAfterCOSEKey: [UInt8] = []
    /// Leaf validity; nil: one day before `now` to two days after, as Apple's credCerts run about three days.
    package var leafValidity: (notBefore: Int64, notAfter: Int64)?
    /// The intermediate sent in x5c; nil: the device CA's. `[]` sends the leaf alone.
    package var intermediates: [[UInt8]]?
    /// The receipt sent; nil: one the CA signs over this attestation's app id, leaf and client data hash.
    package var receipt: [UInt8]?
    /// Who signs the receipt over this attestation's fields (chained through the CA's intermediate); nil: the CA's
    /// receipt signer.
    package var receiptSigner: (key: TestP256Key, certificate: [UInt8])?
    /// Replaces the whole attestation object after it is built (for structural damage).
    package var rewrite: (@Sendable (CBORValue) -> CBORValue)?

    package init() {}
}

/// A software App Attest device: a P-256 key, its key id, and a certificate authority that plays Apple's
/// part, building attestation objects (`attestKey`) and assertions (`generateAssertion`) byte for byte as a
/// device does: CBOR {fmt, attStmt {x5c, receipt}, authData}, authData = rpIdHash ‖ flags ‖ counter ‖ aaguid ‖
/// credentialIdLength ‖ credentialId ‖ COSE key; assertions {signature, authenticatorData} signed over
/// SHA-256(authenticatorData ‖ clientDataHash).
package struct SoftwareAppAttestDevice: Sendable {
    package let ca: TestAppAttestCA
    package let key: TestP256Key
    package let appId: String
    package let environment: AppAttestEnvironment
    /// The time certificates are issued around (Unix seconds).
    package let now: Int64
    /// The counter of the last assertion (0 after attestation).
    package private(set) var counter: UInt32 = 0

    /// - Parameters:
    ///   - ca: nil makes a fresh CA valid from a year before `now` to ten years after.
    package init(appId: String = "ABCDE12345.com.example.relay", environment: AppAttestEnvironment = .production, now: Int64 = 1_767_225_600,
                 ca: TestAppAttestCA? = nil, key: TestP256Key = TestP256Key()) {
        self.appId = appId
        self.environment = environment
        self.now = now
        self.ca = ca ?? TestAppAttestCA(notBefore: now - 365 * 86_400, notAfter: now + 3650 * 86_400)
        self.key = key
    }

    /// SHA-256 of the public key, the id `generateKey` returns.
    package var keyId: [UInt8] { TestSHA256.digest(key.publicPoint) }

    package var publicKey: [UInt8] { key.publicPoint }

    /// The root PEM to trust.
    package var rootPEM: [UInt8] { ca.rootPEM }

    /// The COSE_Key of `key` (RFC 9053: kty EC2, alg ES256, crv P-256, x, y).
    package static func coseKey(_ key: TestP256Key) -> CBORValue {
        let point = key.publicPoint
        return .map([
            CBORMapEntry(key: .int(1), value: .int(2)),
            CBORMapEntry(key: .int(3), value: .int(-7)),
            CBORMapEntry(key: .int(-1), value: .int(1)),
            CBORMapEntry(key: .int(-2), value: .bytes(Array(point[1..<33]))),
            CBORMapEntry(key: .int(-3), value: .bytes(Array(point[33..<65]))),
        ])
    }

    /// The authData of an attestation.
    package func attestationAuthData(_ tampering: AttestationTampering = AttestationTampering()) -> [UInt8] {
        let credentialId = tampering.credentialId ?? keyId
        var data = TestSHA256.digest(Array((tampering.rpId ?? appId).utf8))
        data.append(tampering.flags ?? 0x40)
        data += Self.bigEndian(tampering.counter)
        data += tampering.aaguid ?? environment.aaguid
        data += [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xFF)]
        data += credentialId
        data += CBORWriter.encode(tampering.coseKey ?? Self.coseKey(key))
        data += tampering.bytesAfterCOSEKey
        return data
    }

    /// An attestation object for `clientDataHash` (the bytes the app passes to `attestKey`), with the receipt
    /// Apple's server would attach.
    package func attestation(clientDataHash: [UInt8], tampering: AttestationTampering = AttestationTampering()) -> [UInt8] {
        let authData = attestationAuthData(tampering)
        let nonce = tampering.certifiedNonce ?? TestSHA256.digest(authData + clientDataHash)
        let validity = tampering.leafValidity ?? (now - 86_400, now + 2 * 86_400)
        let leaf = ca.leaf(for: tampering.certifiedKey ?? key, nonceExtension: tampering.omitNonceExtension ? nil : TestAppAttestCA.nonceExtension(nonce),
                           notBefore: validity.notBefore, notAfter: validity.notAfter)
        let x5c = [leaf] + (tampering.intermediates ?? [ca.intermediate])
        let receipt = tampering.receipt
            ?? ca.receipt(fields: [(2, Array(appId.utf8)), (3, leaf), (4, clientDataHash), (6, Array("ATTEST".utf8))], signer: tampering.receiptSigner)
        var object = CBORValue.textMap([
            ("fmt", .text(tampering.fmt)),
            ("attStmt", .textMap([("x5c", .array(x5c.map { .bytes($0) })), ("receipt", .bytes(receipt))])),
            ("authData", .bytes(authData)),
        ])
        if let rewrite = tampering.rewrite { object = rewrite(object) }
        return CBORWriter.encode(object)
    }

    /// The authenticatorData of an assertion: rpIdHash ‖ flags (0x40, as devices send) ‖ counter ‖ `extra`.
    package func assertionAuthenticatorData(counter: UInt32, rpId: String? = nil, flags: UInt8 = 0x40, extra: [UInt8] = []) -> [UInt8] {
        TestSHA256.digest(Array((rpId ?? appId).utf8)) + [flags] + Self.bigEndian(counter) + extra
    }

    /// The next assertion (counter + 1) over `clientDataHash`, as `generateAssertion` returns it.
    package mutating func assertion(clientDataHash: [UInt8]) -> [UInt8] {
        counter += 1
        return assertion(clientDataHash: clientDataHash, counter: counter)
    }

    /// An assertion with a chosen counter, app id, signing key and trailing authenticatorData bytes; the
    /// device's own counter does not move.
    package func assertion(clientDataHash: [UInt8], counter: UInt32, rpId: String? = nil, signingKey: TestP256Key? = nil,
                           extra: [UInt8] = []) -> [UInt8] {
        let authenticatorData = assertionAuthenticatorData(counter: counter, rpId: rpId, extra: extra)
        let signature = (signingKey ?? key).signDER(TestSHA256.digest(authenticatorData + clientDataHash))
        return Self.assertionObject(signature: signature, authenticatorData: authenticatorData)
    }

    package static func assertionObject(signature: [UInt8], authenticatorData: [UInt8]) -> [UInt8] {
        CBORWriter.encode(.textMap([("signature", .bytes(signature)), ("authenticatorData", .bytes(authenticatorData))]))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
