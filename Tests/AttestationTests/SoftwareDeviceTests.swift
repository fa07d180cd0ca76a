import Attestation
import AttestationTestSupport
import Testing

/// Every check of the verifier, one at a time, with a software device under a test CA: a valid attestation and
/// assertion first, then each knob that breaks exactly one step, and the step the verifier names.
@Suite struct SoftwareDeviceTests {
    static let now: Int64 = 1_767_225_600 // 2026-01-01T00:00:00Z
    static let clientDataHash = TestSHA256.digest(Array("challenge-1".utf8))
    static let device = SoftwareAppAttestDevice(appId: "ABCDE12345.com.example.relay", environment: .production, now: now)

    let device = Self.device

    func verifier(appIds: [String]? = nil, environment: AppAttestEnvironment = .production, rootPEM: [UInt8]? = nil) throws -> AppAttestVerifier {
        try AppAttestVerifier(appIds: appIds ?? ["OTHER12345.com.example.other", device.appId], environment: environment,
                              rootCAPEM: rootPEM ?? device.rootPEM)
    }

    func verify(_ tampering: AttestationTampering = AttestationTampering(), keyId: [UInt8]? = nil, clientDataHash: [UInt8] = clientDataHash,
                at: Int64 = now, environment: AppAttestEnvironment = .production, appIds: [String]? = nil) throws -> Result<AppAttestKey, AppAttestFailure> {
        let object = device.attestation(clientDataHash: Self.clientDataHash, tampering: tampering)
        return try verifier(appIds: appIds, environment: environment)
            .verifyAttestation(object, keyId: keyId ?? device.keyId, clientDataHash: clientDataHash, atUnixSeconds: at)
    }

    func failure(_ step: String) -> Result<AppAttestKey, AppAttestFailure> { .failure(AppAttestFailure(step: step)) }

    @Test func aValidAttestationRegistersTheKey() throws {
        let key = try verify().get()
        #expect(key.keyId == device.keyId)
        #expect(key.publicKey == device.publicKey)
        #expect(key.appId == device.appId)
        #expect(key.environment == .production)
        #expect(key.counter == 0)
        #expect(!key.receipt.isEmpty)
    }

    @Test func theDevelopmentEnvironment() throws {
        let developer = SoftwareAppAttestDevice(environment: .development, now: Self.now, ca: device.ca)
        let verifier = try AppAttestVerifier(appIds: [developer.appId], environment: .development, rootCAPEM: developer.rootPEM)
        let object = developer.attestation(clientDataHash: Self.clientDataHash)
        #expect(verifier.verifyAttestation(object, keyId: developer.keyId, clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now)
            .map(\.environment) == .success(.development))
        let production = try AppAttestVerifier(appIds: [developer.appId], environment: .production, rootCAPEM: developer.rootPEM)
        #expect(production.verifyAttestation(object, keyId: developer.keyId, clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now)
            == .failure(AppAttestFailure(step: "aaguid")))
    }

    @Test func extensionBytesAfterTheCOSEKeyWithoutTheEDFlagAreTolerated() throws {
        var tampering = AttestationTampering()
        tampering.bytesAfterCOSEKey = CBORWriter.encode(.textMap([("apple_bundle_version_01", .text("1")), ("x", .bytes([1, 0, 0, 0]))]))
        #expect(try verify(tampering).map(\.keyId) == .success(device.keyId))
        tampering.bytesAfterCOSEKey = [0xFF, 0x00, 0x13] // not even CBOR: ignored too, the nonce covers it
        #expect(try verify(tampering).map(\.keyId) == .success(device.keyId))
    }

    @Test func eachStepFailsOnItsOwn() throws {
        var t = AttestationTampering()

        t = AttestationTampering(); t.fmt = "packed"
        #expect(try verify(t) == failure("format"))

        t = AttestationTampering(); t.intermediates = []
        #expect(try verify(t) == failure("certificate_chain"))
        let otherCA = TestAppAttestCA(notBefore: Self.now - 86_400, notAfter: Self.now + 86_400)
        t = AttestationTampering(); t.intermediates = [otherCA.intermediate]
        let wrongIntermediate = try verify(t)
        #expect(wrongIntermediate == failure("certificate_chain"), "\(wrongIntermediate)")
        // An unused extra certificate in x5c: bytes no signature covers, refused.
        t = AttestationTampering(); t.intermediates = [device.ca.intermediate, otherCA.intermediate]
        #expect(try verify(t) == failure("certificate_chain"))
        // The root sent along as well is on the verified path: accepted.
        t = AttestationTampering(); t.intermediates = [device.ca.intermediate, device.ca.root]
        #expect(try verify(t).map(\.keyId) == .success(device.keyId))

        t = AttestationTampering(); t.leafValidity = (Self.now - 3 * 86_400, Self.now - 1)
        #expect(try verify(t) == failure("certificate_validity"))
        t = AttestationTampering(); t.leafValidity = (Self.now + 1, Self.now + 86_400)
        #expect(try verify(t) == failure("certificate_validity"))

        t = AttestationTampering(); t.certifiedNonce = [UInt8](repeating: 0xAB, count: 32)
        #expect(try verify(t) == failure("nonce"))
        t = AttestationTampering(); t.omitNonceExtension = true
        #expect(try verify(t) == failure("nonce"))
        #expect(try verify(clientDataHash: TestSHA256.digest(Array("challenge-2".utf8))) == failure("nonce"))

        t = AttestationTampering(); t.certifiedKey = TestP256Key()
        #expect(try verify(t) == failure("key_id"))
        #expect(try verify(keyId: TestSHA256.digest([1])) == failure("key_id"))

        t = AttestationTampering(); t.flags = 0x00
        #expect(try verify(t) == failure("auth_data"))

        t = AttestationTampering(); t.rpId = "ABCDE12345.com.example.other"
        #expect(try verify(t) == failure("app_id"))
        #expect(try verify(appIds: ["OTHER12345.com.example.relay"]) == failure("app_id"))

        t = AttestationTampering(); t.counter = 1
        #expect(try verify(t) == failure("counter"))

        t = AttestationTampering(); t.aaguid = Array("appattestdevelop".utf8)
        #expect(try verify(t) == failure("aaguid"))
        #expect(try verify(environment: .development) == failure("aaguid"))
        t = AttestationTampering(); t.aaguid = Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 1]
        #expect(try verify(t) == failure("aaguid"))

        t = AttestationTampering(); t.credentialId = TestSHA256.digest([2])
        #expect(try verify(t) == failure("credential_id"))

        t = AttestationTampering(); t.coseKey = SoftwareAppAttestDevice.coseKey(TestP256Key())
        #expect(try verify(t) == failure("credential_public_key"))
        t = AttestationTampering(); t.coseKey = .textMap([("kty", .int(2))])
        #expect(try verify(t) == failure("credential_public_key"))

        t = AttestationTampering(); t.receipt = Array("not a receipt".utf8)
        #expect(try verify(t) == failure("receipt"))
        // A receipt validly signed by the CA but about another leaf, app or client data.
        let leafOfAnother = device.ca.leaf(for: TestP256Key(), nonceExtension: nil, notBefore: Self.now - 1, notAfter: Self.now + 1)
        for fields in [[(2, Array("OTHER12345.com.example.other".utf8)), (3, leafOfAnother), (4, Self.clientDataHash)],
                       [(2, Array(device.appId.utf8)), (3, leafOfAnother), (4, Self.clientDataHash)]] {
            t = AttestationTampering(); t.receipt = device.ca.receipt(fields: fields)
            #expect(try verify(t) == failure("receipt"))
        }
        // A receipt signed under another root.
        t = AttestationTampering(); t.receipt = otherCA.receipt(fields: [(2, Array(device.appId.utf8))])
        #expect(try verify(t) == failure("receipt"))
        // A receipt about this attestation, signed by a certificate of the receipt root's PKI that is not a receipt
        // signer (no 1.2.840.113635.100.12.15): under Apple Root CA - G3 that is any Apple Pay or other certificate
        // whose key its holder has.
        let merchantKey = TestP256Key()
        let merchant = merchantKey.certificate(subject: "Merchant Identity", issuer: device.ca.intermediateKey,
                                               issuerName: TestAppAttestCA.intermediateName, serial: 9,
                                               notBefore: Self.now - 86_400, notAfter: Self.now + 86_400, isCA: false)
        t = AttestationTampering(); t.receiptSigner = (merchantKey, merchant)
        #expect(try verify(t) == failure("receipt"))
        // The same certificate with the marker (the CA's own signer is one): accepted.
        let markedKey = TestP256Key()
        let marked = markedKey.certificate(subject: "Receipt Signing 2", issuer: device.ca.intermediateKey,
                                           issuerName: TestAppAttestCA.intermediateName, serial: 10,
                                           notBefore: Self.now - 86_400, notAfter: Self.now + 86_400, isCA: false,
                                           extensionOID: AppAttestVerifier.receiptSignerExtensionOID, extensionValue: [0x05, 0x00])
        t = AttestationTampering(); t.receiptSigner = (markedKey, marked)
        #expect(try verify(t).map(\.keyId) == .success(device.keyId))
    }

    @Test func theRootMustBeTrusted() throws {
        let stranger = SoftwareAppAttestDevice(now: Self.now)
        let verifier = try verifier() // trusts `device`'s CA only
        let object = stranger.attestation(clientDataHash: Self.clientDataHash)
        #expect(verifier.verifyAttestation(object, keyId: stranger.keyId, clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now)
            == .failure(AppAttestFailure(step: "certificate_chain")))
        // The built-in Apple root does not trust the test CA either.
        let apple = try AppAttestVerifier(appIds: [device.appId], environment: .production)
        #expect(apple.verifyAttestation(device.attestation(clientDataHash: Self.clientDataHash), keyId: device.keyId,
                                        clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now) == .failure(AppAttestFailure(step: "certificate_chain")))
    }

    @Test func structuralDamageIsNamed() throws {
        var t = AttestationTampering()
        t.rewrite = { _ in .array([]) }
        #expect(try verify(t) == failure("format"))
        t.rewrite = { object in
            guard case .map(let entries) = object else { return object }
            return .map(entries.filter { $0.key != .text("authData") })
        }
        #expect(try verify(t) == failure("format"))
        t.rewrite = { object in
            guard case .map(var entries) = object else { return object }
            entries[2].value = .text("authData as text")
            return .map(entries)
        }
        #expect(try verify(t) == failure("format"))

        let verifier = try verifier()
        let valid = device.attestation(clientDataHash: Self.clientDataHash)
        func run(_ bytes: [UInt8]) -> Result<AppAttestKey, AppAttestFailure> {
            verifier.verifyAttestation(bytes, keyId: device.keyId, clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now)
        }
        #expect(run(valid + [0]) == failure("cbor"))
        #expect(run(Array(valid.dropLast())) == failure("cbor"))
        #expect(run([]) == failure("cbor"))
        #expect(run([0xBF]) == failure("cbor"))
        #expect(run(valid + [UInt8](repeating: 0, count: AppAttestVerifier.maxAttestationBytes)) == failure("too_large"))
    }

    @Test func aLargeButLegalAttestationPassesAndOneByteMoreDoesNot() throws {
        let base = device.attestation(clientDataHash: Self.clientDataHash).count
        var t = AttestationTampering()
        // Pad the authData extension so the whole object is exactly 16 KiB.
        // ECDSA signatures (leaf, receipt) vary by a byte or two from one signing to the next; the test support signs
        // again until each is 72 bytes (COpenSSL's test issuers), so one correction lands. Without that, 20 tries
        // missed in 2 of 25 runs (each try signs afresh and lands only when the lengths repeat).
        t.bytesAfterCOSEKey = [UInt8](repeating: 0, count: AppAttestVerifier.maxAttestationBytes - base - 600)
        var object = device.attestation(clientDataHash: Self.clientDataHash, tampering: t)
        for _ in 0..<20 where object.count != AppAttestVerifier.maxAttestationBytes {
            let missing = AppAttestVerifier.maxAttestationBytes - object.count
            if missing > 0 { t.bytesAfterCOSEKey += [UInt8](repeating: 0, count: missing) } else { t.bytesAfterCOSEKey.removeLast(-missing) }
            object = device.attestation(clientDataHash: Self.clientDataHash, tampering: t)
        }
        #expect(object.count == AppAttestVerifier.maxAttestationBytes)
        let verifier = try verifier()
        #expect(verifier.verifyAttestation(object, keyId: device.keyId, clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now)
            .map(\.keyId) == .success(device.keyId))
        // More than the signatures' lengths can take back: each new object signs again (the leaf certificate, the
        // receipt), and a DER ECDSA signature is 70 to 72 bytes, so a few bytes more could come out the same size.
        t.bytesAfterCOSEKey += [UInt8](repeating: 0, count: 64)
        #expect(verifier.verifyAttestation(device.attestation(clientDataHash: Self.clientDataHash, tampering: t), keyId: device.keyId,
                                           clientDataHash: Self.clientDataHash, atUnixSeconds: Self.now) == failure("too_large"))
    }

    @Test func configurationErrors() {
        #expect(throws: AppAttestFailure(step: "configuration")) { try AppAttestVerifier(appIds: [], environment: .production) }
        #expect(throws: AppAttestFailure(step: "configuration")) { try AppAttestVerifier(appIds: [""], environment: .production) }
        #expect(throws: AppAttestFailure(step: "root_ca")) {
            try AppAttestVerifier(appIds: ["A.b"], environment: .production, rootCAPEM: Array("not a certificate".utf8))
        }
        #expect(throws: AppAttestFailure(step: "root_ca")) {
            try AppAttestVerifier(appIds: ["A.b"], environment: .production,
                                  rootCAPEM: Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8))
        }
    }

    // MARK: - Assertions

    func assert(_ assertion: [UInt8], clientDataHash: [UInt8] = clientDataHash, publicKey: [UInt8]? = nil, appId: String? = nil) -> Result<UInt32, AppAttestFailure> {
        AppAttestVerifier.verifyAssertion(assertion, clientDataHash: clientDataHash, publicKey: publicKey ?? device.publicKey, appId: appId ?? device.appId)
    }

    @Test func assertionsReturnTheirCounter() {
        var phone = device
        #expect(assert(phone.assertion(clientDataHash: Self.clientDataHash)) == .success(1))
        #expect(assert(phone.assertion(clientDataHash: Self.clientDataHash)) == .success(2))
        #expect(assert(device.assertion(clientDataHash: Self.clientDataHash, counter: UInt32.max)) == .success(UInt32.max))
    }

    @Test func assertionAuthenticatorDataLongerThan37BytesIsReadByOffsets() {
        let assertion = device.assertion(clientDataHash: Self.clientDataHash, counter: 7, extra: [0xA1, 0x01, 0x02, 0x00, 0xFF])
        #expect(assert(assertion) == .success(7))
    }

    @Test func eachAssertionStepFailsOnItsOwn() {
        let valid = device.assertion(clientDataHash: Self.clientDataHash, counter: 3)
        #expect(assert(valid) == .success(3))
        #expect(assert(valid, clientDataHash: TestSHA256.digest(Array("other".utf8))) == .failure(AppAttestFailure(step: "signature")))
        #expect(assert(valid, publicKey: TestP256Key().publicPoint) == .failure(AppAttestFailure(step: "signature")))
        #expect(assert(device.assertion(clientDataHash: Self.clientDataHash, counter: 3, signingKey: TestP256Key()))
            == .failure(AppAttestFailure(step: "signature")))
        #expect(assert(valid, appId: "OTHER12345.com.example.relay") == .failure(AppAttestFailure(step: "app_id")))
        #expect(assert(device.assertion(clientDataHash: Self.clientDataHash, counter: 3, rpId: "OTHER12345.com.example.relay"))
            == .failure(AppAttestFailure(step: "app_id")))
        #expect(assert(valid, publicKey: Array(device.publicKey.dropLast())) == .failure(AppAttestFailure(step: "public_key")))
        var offCurve = device.publicKey
        offCurve[64] ^= 1
        #expect(assert(valid, publicKey: offCurve) == .failure(AppAttestFailure(step: "public_key")))

        let shortData = SoftwareAppAttestDevice.assertionObject(signature: [0x30, 0x00], authenticatorData: [UInt8](repeating: 0, count: 36))
        #expect(assert(shortData) == .failure(AppAttestFailure(step: "auth_data")))
        let missing = CBORWriter.encode(.textMap([("signature", .bytes([1]))]))
        #expect(assert(missing) == .failure(AppAttestFailure(step: "format")))
        #expect(assert(CBORWriter.encode(.array([]))) == .failure(AppAttestFailure(step: "format")))
        #expect(assert(valid + [0]) == .failure(AppAttestFailure(step: "cbor")))
        let tooLarge = device.assertion(clientDataHash: Self.clientDataHash, counter: 3, extra: [UInt8](repeating: 0, count: 1024))
        #expect(assert(tooLarge) == .failure(AppAttestFailure(step: "too_large")))
    }
}
