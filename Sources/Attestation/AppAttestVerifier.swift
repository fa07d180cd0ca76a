/// Apple App Attest, verified offline (Apple, "Validating apps that connect to your server"): an attestation once
/// per key, then an assertion per request. Pure: bytes and the time in, a result out; no clock, no network, no
/// Foundation. Apple's root is built in; tests and private deployments pass their own.

/// Which App Attest environment a key was made in; the attestation's aaguid says it.
package enum AppAttestEnvironment: String, Sendable {
    case production, development

    /// The aaguid an attestation from this environment carries: `appattestdevelop`, or `appattest` and 7 NUL bytes.
    package var aaguid: [UInt8] {
        switch self {
        case .production: return Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        case .development: return Array("appattestdevelop".utf8)
        }
    }
}

/// What a successful attestation establishes, and what registration stores.
package struct AppAttestKey: Sendable, Equatable {
    /// 32 bytes: SHA-256 of `publicKey`.
    package var keyId: [UInt8]
    /// 65 bytes, X9.62 uncompressed P-256 point.
    package var publicKey: [UInt8]
    /// The configured "TEAMID.bundle.id" whose SHA-256 the attestation's rpIdHash matched.
    package var appId: String
    package var environment: AppAttestEnvironment
    /// Apple's receipt (CMS SignedData), kept for DeviceCheck's fraud-risk queries; its signature and its app id,
    /// certificate and client data hash fields were checked.
    package var receipt: [UInt8]
    /// 0 after attestation.
    package var counter: UInt32

    package init(keyId: [UInt8], publicKey: [UInt8], appId: String, environment: AppAttestEnvironment, receipt: [UInt8], counter: UInt32) {
        self.keyId = keyId
        self.publicKey = publicKey
        self.appId = appId
        self.environment = environment
        self.receipt = receipt
        self.counter = counter
    }
}

/// The check that failed, by name, for logs and the command line; the relay's clients see only a code.
///
/// Steps: `too_large` (attestation over 16 KiB, assertion over 1 KiB), `cbor` (not well-formed, bounded CBOR),
/// `format` (missing or mistyped fields, `fmt` not `apple-appattest`), `certificate_chain` (x5c does not chain
/// to the root), `certificate_validity` (a certificate of the chain is outside its validity at the given time),
/// `nonce` (the leaf's 1.2.840.113635.100.8.2 extension is missing or is not SHA-256(authData ‖ clientDataHash)),
/// `key_id` (SHA-256 of the leaf's public key is not the key id), `auth_data` (authenticator data too short or
/// without attested credential data), `app_id` (rpIdHash is not SHA-256 of a configured app id), `counter`
/// (not 0 in an attestation), `aaguid` (not the configured environment's), `credential_id` (not the key id),
/// `credential_public_key` (the COSE key is not the leaf's key), `receipt` (the receipt's CMS signature does not
/// chain to the receipt root at the given time, its signer lacks Apple's receipt-signer extension, or its app id,
/// certificate or client data hash fields are not this attestation's), `public_key` (an assertion's stored key is not
/// a P-256 point), `signature` (the assertion's signature does not hold). From `init`: `configuration` (no app
/// id, or an empty one) and `root_ca` (the PEM holds no certificate).
package struct AppAttestFailure: Error, Equatable, Sendable {
    package var step: String

    package init(step: String) { self.step = step }

    static let tooLarge = AppAttestFailure(step: "too_large")
    static let cbor = AppAttestFailure(step: "cbor")
    static let format = AppAttestFailure(step: "format")
    static let certificateChain = AppAttestFailure(step: "certificate_chain")
    static let certificateValidity = AppAttestFailure(step: "certificate_validity")
    static let nonce = AppAttestFailure(step: "nonce")
    static let keyId = AppAttestFailure(step: "key_id")
    static let authData = AppAttestFailure(step: "auth_data")
    static let appId = AppAttestFailure(step: "app_id")
    static let counter = AppAttestFailure(step: "counter")
    static let aaguid = AppAttestFailure(step: "aaguid")
    static let credentialId = AppAttestFailure(step: "credential_id")
    static let credentialPublicKey = AppAttestFailure(step: "credential_public_key")
    static let receipt = AppAttestFailure(step: "receipt")
    static let publicKey = AppAttestFailure(step: "public_key")
    static let signature = AppAttestFailure(step: "signature")
    static let configuration = AppAttestFailure(step: "configuration")
    static let rootCA = AppAttestFailure(step: "root_ca")
}

/// Verifies App Attest attestation objects and assertions for a set of app ids in one environment.
///
/// A plain value (the roots are kept as DER bytes and parsed per call), so one verifier may be used from any
/// number of threads at once.
package struct AppAttestVerifier: Sendable {
    package static let maxAttestationBytes = 16 * 1024
    package static let maxAssertionBytes = 1024
    /// Apple's nonce: the leaf certificate's extension whose value is SEQUENCE { [1] EXPLICIT OCTET STRING }.
    package static let nonceExtensionOID = "1.2.840.113635.100.8.2"
    /// The extension Apple's receipt signing certificate ("Application Attestation Fraud Receipt Signing") carries.
    package static let receiptSignerExtensionOID = "1.2.840.113635.100.12.15"

    package let appIds: [String]
    package let environment: AppAttestEnvironment
    /// SHA-256 of each app id, in the order of `appIds`.
    private let appIdHashes: [[UInt8]]
    /// Trusted roots, DER.
    private let roots: [[UInt8]]
    /// Roots the receipt's signer must chain to, DER.
    private let receiptRoots: [[UInt8]]

    /// - Parameters:
    ///   - appIds: "TEAMID.bundle.id" of each app allowed to attest; at least one.
    ///   - rootCAPEM: PEM text of the trusted root(s); nil is Apple App Attestation Root CA, built in.
    ///   - receiptRootCAPEM: PEM text of the root(s) the receipt's signer chains to; nil is Apple Root CA - G3
    ///     (built in) with Apple's attestation root, and `rootCAPEM` when that is given (one private PKI).
    package init(appIds: [String], environment: AppAttestEnvironment, rootCAPEM: [UInt8]? = nil, receiptRootCAPEM: [UInt8]? = nil) throws(AppAttestFailure) {
        guard !appIds.isEmpty, appIds.allSatisfy({ !$0.isEmpty }) else { throw .configuration }
        guard let roots = AttestationCrypto.certificatesFromPEM(rootCAPEM ?? Array(AppleAppAttestationRootCA.pem.utf8)),
              let receiptRoots = AttestationCrypto.certificatesFromPEM(receiptRootCAPEM ?? rootCAPEM ?? Array(AppleRootCAG3.pem.utf8))
        else { throw .rootCA }
        self.appIds = appIds
        self.environment = environment
        self.appIdHashes = appIds.map { AttestationCrypto.sha256(Array($0.utf8)) }
        self.roots = roots
        self.receiptRoots = receiptRoots
    }

    /// Checks an attestation object (the CBOR `attestKey` returned) for `keyId` against `clientDataHash` (the
    /// exact bytes the app passed to `attestKey`), every certificate valid at `atUnixSeconds`.
    package func verifyAttestation(_ attestationObject: [UInt8], keyId: [UInt8], clientDataHash: [UInt8], atUnixSeconds: Int64) -> Result<AppAttestKey, AppAttestFailure> {
        Result { () throws(AppAttestFailure) in
            try attestation(attestationObject, keyId: keyId, clientDataHash: clientDataHash, atUnixSeconds: atUnixSeconds)
        }
    }

    /// Checks an assertion (the CBOR `generateAssertion` returned): the ECDSA P-256 SHA-256 signature over
    /// SHA-256(authenticatorData ‖ clientDataHash) with `publicKey` (X9.62 uncompressed), and rpIdHash ==
    /// SHA-256(appId). Returns the assertion's counter; the caller compares it with the stored one.
    package static func verifyAssertion(_ assertion: [UInt8], clientDataHash: [UInt8], publicKey: [UInt8], appId: String) -> Result<UInt32, AppAttestFailure> {
        Result { () throws(AppAttestFailure) in
            try Self.assertion(assertion, clientDataHash: clientDataHash, publicKey: publicKey, appId: appId)
        }
    }

    // MARK: - Attestation (Apple's steps 1-9, in Apple's order)

    /// Attestation objects nest three levels (map → attStmt → x5c); a little room above that, no more.
    private static let attestationLimits = CBORReader.Limits(maxDepth: 4, maxItems: 64, maxBytes: maxAttestationBytes)
    private static let assertionLimits = CBORReader.Limits(maxDepth: 2, maxItems: 16, maxBytes: maxAssertionBytes)

    private func attestation(_ object: [UInt8], keyId: [UInt8], clientDataHash: [UInt8], atUnixSeconds: Int64) throws(AppAttestFailure) -> AppAttestKey {
        guard object.count <= Self.maxAttestationBytes else { throw .tooLarge }
        let decoded: CBORValue
        do { decoded = try CBORReader.decode(object, limits: Self.attestationLimits) } catch { throw .cbor }
        guard decoded["fmt"]?.text == "apple-appattest",
              let statement = decoded["attStmt"], statement.isMap,
              let authData = decoded["authData"]?.bytes,
              let x5c = statement["x5c"]?.array, (1...4).contains(x5c.count),
              let receipt = statement["receipt"]?.bytes
        else { throw .format }
        var certificates: [[UInt8]] = []
        for item in x5c {
            guard let der = item.bytes else { throw .format }
            certificates.append(der)
        }
        let leaf = certificates[0]

        // 1. x5c[0] (credCert) chains through the intermediates to a trusted root, valid at the given time.
        switch AttestationCrypto.verifyChain(leaf: leaf, intermediates: Array(certificates.dropFirst()), roots: roots, atUnixSeconds: atUnixSeconds) {
        case .valid: break
        case .outsideValidity: throw .certificateValidity
        case .invalid: throw .certificateChain
        }

        // 2-4. nonce = SHA-256(authData ‖ clientDataHash) equals the leaf's nonce extension.
        let nonce = AttestationCrypto.sha256(authData + clientDataHash)
        guard let value = AttestationCrypto.extensionValue(certificate: leaf, oid: Self.nonceExtensionOID),
              let certified = Self.nonceFromExtension(value),
              AttestationCrypto.constantTimeEqual(certified, nonce)
        else { throw .nonce }

        // 5. SHA-256 of the leaf's public key (X9.62 uncompressed) is the key id.
        guard let publicKey = AttestationCrypto.p256PublicKey(certificate: leaf),
              AttestationCrypto.constantTimeEqual(AttestationCrypto.sha256(publicKey), keyId)
        else { throw .keyId }

        guard let data = AuthenticatorData.parseAttestation(authData), let credential = data.credential else { throw .authData }

        // 6. rpIdHash is SHA-256 of one of the app ids (every candidate compared, in constant time each).
        var matched: String?
        for (index, hash) in appIdHashes.enumerated() where AttestationCrypto.constantTimeEqual(hash, data.rpIdHash) {
            matched = matched ?? appIds[index]
        }
        guard let appId = matched else { throw .appId }

        // 7. The counter is 0.
        guard data.counter == 0 else { throw .counter }

        // 8. The aaguid names the configured environment.
        guard AttestationCrypto.constantTimeEqual(credential.aaguid, environment.aaguid) else { throw .aaguid }

        // 9. The credential id is the key id.
        guard AttestationCrypto.constantTimeEqual(credential.credentialId, keyId) else { throw .credentialId }

        // Beyond Apple's list: the COSE key in authData is the certified key (EC2, ES256, P-256, same x and y).
        guard Self.coseKeyPoint(credential.publicKey).map({ AttestationCrypto.constantTimeEqual($0, publicKey) }) == true else {
            throw .credentialPublicKey
        }

        // Beyond Apple's list: the receipt is Apple's signed statement about this attestation (fields 2, 3, 4), so
        // the bytes stored for fraud-risk queries are Apple's, not the sender's. Its signer must be a receipt signer
        // (the extension Apple's carries): Apple Root CA - G3 also anchors certificates whose keys others hold
        // (Apple Pay merchant and payment processing certificates, for one).
        guard let content = AttestationCrypto.verifiedCMSContent(receipt, roots: receiptRoots, signerExtensionOID: Self.receiptSignerExtensionOID,
                                                                 atUnixSeconds: atUnixSeconds),
              let fields = AppAttestReceiptFields(content: content),
              fields.fields[AppAttestReceiptFields.appId] == Array(appId.utf8),
              fields.fields[AppAttestReceiptFields.attestedCertificate] == leaf,
              fields.fields[AppAttestReceiptFields.clientDataHash] == clientDataHash
        else { throw .receipt }

        return AppAttestKey(keyId: keyId, publicKey: publicKey, appId: appId, environment: environment, receipt: receipt, counter: 0)
    }

    /// The 32-byte nonce inside the extension's value. DER leaves one encoding of SEQUENCE { [1] EXPLICIT
    /// OCTET STRING (32 bytes) }: 30 24 A1 22 04 20 followed by the 32 bytes; anything else is refused.
    package static func nonceFromExtension(_ value: [UInt8]) -> [UInt8]? {
        let prefix: [UInt8] = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20]
        guard value.count == prefix.count + 32, value.starts(with: prefix) else { return nil }
        return Array(value[prefix.count...])
    }

    /// 04 ‖ x ‖ y of a COSE EC2 key for ES256 on P-256 (RFC 9053: kty 1 → 2, alg 3 → -7, crv -1 → 1, x -2,
    /// y -3); nil for any other key.
    package static func coseKeyPoint(_ key: CBORValue) -> [UInt8]? {
        guard key[.int(1)]?.integer == 2, key[.int(3)]?.integer == -7, key[.int(-1)]?.integer == 1,
              let x = key[.int(-2)]?.bytes, x.count == 32, let y = key[.int(-3)]?.bytes, y.count == 32
        else { return nil }
        return [0x04] + x + y
    }

    // MARK: - Assertion (Apple's assertion steps 1-4; step 5, the counter, is the caller's)

    private static func assertion(_ assertion: [UInt8], clientDataHash: [UInt8], publicKey: [UInt8], appId: String) throws(AppAttestFailure) -> UInt32 {
        guard assertion.count <= maxAssertionBytes else { throw .tooLarge }
        let decoded: CBORValue
        do { decoded = try CBORReader.decode(assertion, limits: assertionLimits) } catch { throw .cbor }
        guard decoded.isMap, let signature = decoded["signature"]?.bytes, let authenticatorData = decoded["authenticatorData"]?.bytes else {
            throw .format
        }
        guard let data = AuthenticatorData.parseAssertion(authenticatorData) else { throw .authData }
        // 1-3. nonce = SHA-256(authenticatorData ‖ clientDataHash); the signature is ECDSA P-256 SHA-256 over it.
        let nonce = AttestationCrypto.sha256(authenticatorData + clientDataHash)
        guard let valid = AttestationCrypto.verifyES256(publicKey: publicKey, message: nonce, derSignature: signature) else {
            throw .publicKey
        }
        guard valid else { throw .signature }
        // 4. rpIdHash is SHA-256 of the key's app id.
        guard AttestationCrypto.constantTimeEqual(data.rpIdHash, AttestationCrypto.sha256(Array(appId.utf8))) else { throw .appId }
        return data.counter
    }
}
