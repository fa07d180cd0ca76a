internal import COpenSSL

/// Typed calls into the COpenSSL shim for App Attest: hashing, constant-time comparison, ECDSA P-256 over DER
/// signatures, and X.509 (parse, chain, extension, public key). Certificates cross as DER bytes and no OpenSSL
/// object outlives a call, so every value here is a plain Sendable value.
enum AttestationCrypto {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { cossl_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        precondition(ok == 1, "SHA-256 failed: OpenSSL is unusable")
        return digest
    }

    /// Constant-time equality (CRYPTO_memcmp) of two byte strings; different lengths are unequal (lengths are
    /// public here: digests and identifiers of fixed size).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in cossl_equal(x.baseAddress, y.baseAddress, x.count) == 1 }
        }
    }

    /// ECDSA P-256 with SHA-256 of `message`, the signature in DER, with a public key given as an X9.62
    /// uncompressed point (built once and kept in `keys`). nil when the key is not a point on P-256; else whether
    /// the signature holds.
    static func verifyES256(publicKey: [UInt8], message: [UInt8], derSignature: [UInt8],
                            keys: P256KeyCache = .shared) -> Bool? {
        guard let key = keys.key(x962: publicKey) else { return nil }
        return withExtendedLifetime(key) {
            message.withUnsafeBufferPointer { m in
                derSignature.withUnsafeBufferPointer { s in
                    cossl_verify_es256_der(key.pointer, m.baseAddress, m.count, s.baseAddress, s.count) == 1
                }
            }
        }
    }

    /// The certificates in PEM text, as DER; nil when there is none or one does not parse.
    static func certificatesFromPEM(_ pem: [UInt8]) -> [[UInt8]]? {
        let maxCount = 16
        var out = [UInt8](repeating: 0, count: max(pem.count, 1))
        var lengths = [Int](repeating: 0, count: maxCount)
        let count = pem.withUnsafeBufferPointer { text in
            text.withMemoryRebound(to: CChar.self) { chars in
                out.withUnsafeMutableBufferPointer { o in
                    lengths.withUnsafeMutableBufferPointer { l in
                        cossl_x509_pem_to_der(chars.baseAddress, chars.count, o.baseAddress, o.count, l.baseAddress, maxCount)
                    }
                }
            }
        }
        guard count > 0 else { return nil }
        var certificates: [[UInt8]] = []
        var offset = 0
        for length in lengths.prefix(Int(count)) {
            certificates.append(Array(out[offset..<(offset + length)]))
            offset += length
        }
        return certificates
    }

    enum ChainResult: Equatable { case valid, outsideValidity, invalid }

    /// Verifies `leaf` through `intermediates` to one of `roots`, each valid at `atUnixSeconds`.
    static func verifyChain(leaf: [UInt8], intermediates: [[UInt8]], roots: [[UInt8]], atUnixSeconds: Int64) -> ChainResult {
        let intermediateBytes = Array(intermediates.joined())
        let intermediateLengths = intermediates.map(\.count)
        let rootBytes = Array(roots.joined())
        let rootLengths = roots.map(\.count)
        let result = leaf.withUnsafeBufferPointer { l in
            intermediateBytes.withUnsafeBufferPointer { i in
                intermediateLengths.withUnsafeBufferPointer { il in
                    rootBytes.withUnsafeBufferPointer { r in
                        rootLengths.withUnsafeBufferPointer { rl in
                            cossl_x509_verify_chain(l.baseAddress, l.count, i.baseAddress, il.baseAddress, il.count,
                                                    r.baseAddress, rl.baseAddress, rl.count, atUnixSeconds)
                        }
                    }
                }
            }
        }
        switch Int(result) {
        case COSSL_CHAIN_OK: return .valid
        case COSSL_CHAIN_TIME: return .outsideValidity
        default: return .invalid
        }
    }

    /// The content of a CMS SignedData whose signer chains to one of `roots` at `atUnixSeconds` and carries the
    /// extension `signerExtensionOID` (dotted); nil otherwise.
    static func verifiedCMSContent(_ message: [UInt8], roots: [[UInt8]], signerExtensionOID: String, atUnixSeconds: Int64) -> [UInt8]? {
        let rootBytes = Array(roots.joined())
        let rootLengths = roots.map(\.count)
        var content = [UInt8](repeating: 0, count: max(message.count, 1))
        var length = 0
        let ok = message.withUnsafeBufferPointer { m in
            rootBytes.withUnsafeBufferPointer { r in
                rootLengths.withUnsafeBufferPointer { rl in
                    content.withUnsafeMutableBufferPointer { c in
                        cossl_cms_verify(m.baseAddress, m.count, r.baseAddress, rl.baseAddress, rl.count, signerExtensionOID, atUnixSeconds,
                                         c.baseAddress, c.count, &length)
                    }
                }
            }
        }
        return ok == 1 ? Array(content.prefix(length)) : nil
    }

    /// The value of the certificate's one extension `oid` (dotted), nil when absent, repeated or unparsable.
    static func extensionValue(certificate: [UInt8], oid: String, maxLength: Int = 1024) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: maxLength)
        let length = certificate.withUnsafeBufferPointer { c in
            out.withUnsafeMutableBufferPointer { o in
                cossl_x509_extension_value(c.baseAddress, c.count, oid, o.baseAddress, o.count)
            }
        }
        guard length >= 0 else { return nil }
        return Array(out.prefix(length))
    }

    /// The certificate's P-256 public key as an X9.62 uncompressed point; nil for any other key or no parse.
    static func p256PublicKey(certificate: [UInt8]) -> [UInt8]? {
        var point = [UInt8](repeating: 0, count: 65)
        let ok = certificate.withUnsafeBufferPointer { c in
            point.withUnsafeMutableBufferPointer { cossl_x509_p256_public_key(c.baseAddress, c.count, $0.baseAddress) }
        }
        return ok == 1 ? point : nil
    }
}
