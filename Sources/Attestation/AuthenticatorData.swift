/// WebAuthn authenticator data (WebAuthn Level 2, section 6.1), read by offsets:
///
///     rpIdHash (32) | flags (1) | signCount (4, big-endian) | attested credential data (if parsed) | rest
///
/// An assertion's authenticator data is only the first 37 bytes that matter: App Attest sets flags 0x40 (AT)
/// there even though no credential data follows, and may append bytes, so `parseAssertion` reads the three
/// fields at their offsets and nothing else. An attestation's carries the attested credential data
/// (aaguid (16) | credentialIdLength (2) | credentialId | COSE key), which `parseAttestation` reads; whatever
/// follows the COSE key is ignored whether or not the ED flag (0x80) announces it: iOS 27 appends a CBOR map
/// there without that flag.
package struct AuthenticatorData: Sendable, Equatable {
    package static let headerLength = 37
    /// WebAuthn caps credential ids at 1023 bytes (section 6.5.1); App Attest's are 32.
    package static let maxCredentialIdLength = 1023
    package static let attestedCredentialDataFlag: UInt8 = 0x40

    package var rpIdHash: [UInt8]
    package var flags: UInt8
    package var counter: UInt32
    package var credential: AttestedCredential?

    package struct AttestedCredential: Sendable, Equatable {
        package var aaguid: [UInt8]
        package var credentialId: [UInt8]
        /// The COSE_Key (RFC 9052 section 7) as decoded.
        package var publicKey: CBORValue
        /// How many bytes follow the COSE key (extensions), ignored.
        package var trailingByteCount: Int
    }

    /// The three fixed fields; nil when fewer than 37 bytes.
    package static func parseAssertion(_ bytes: [UInt8]) -> AuthenticatorData? {
        guard bytes.count >= headerLength else { return nil }
        let counter = bytes[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return AuthenticatorData(rpIdHash: Array(bytes[0..<32]), flags: bytes[32], counter: counter, credential: nil)
    }

    /// The fixed fields and the attested credential data; nil when the AT flag is missing, the data is cut
    /// short, or the COSE key is not well-formed CBOR.
    package static func parseAttestation(_ bytes: [UInt8]) -> AuthenticatorData? {
        guard var data = parseAssertion(bytes), data.flags & attestedCredentialDataFlag != 0 else { return nil }
        var offset = headerLength
        guard bytes.count >= offset + 18 else { return nil }
        let aaguid = Array(bytes[offset..<(offset + 16)])
        offset += 16
        let idLength = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
        offset += 2
        guard idLength <= maxCredentialIdLength, bytes.count >= offset + idLength else { return nil }
        let credentialId = Array(bytes[offset..<(offset + idLength)])
        offset += idLength
        let limits = CBORReader.Limits(maxDepth: 4, maxItems: 64, maxBytes: AppAttestVerifier.maxAttestationBytes)
        guard let (key, consumed) = try? CBORReader.decodePrefix(bytes[offset...], limits: limits) else { return nil }
        data.credential = AttestedCredential(aaguid: aaguid, credentialId: credentialId, publicKey: key,
                                             trailingByteCount: bytes.count - offset - consumed)
        return data
    }
}
