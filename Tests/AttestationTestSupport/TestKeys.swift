internal import COpenSSL

/// A P-256 private key held by OpenSSL, for the software device and its certificate authority (test only).
package final class TestP256Key: @unchecked Sendable {
    // @unchecked Sendable invariant: `pointer` is set once in init, never mutated or exposed, and freed only in
    // deinit; signing uses a fresh EVP_MD_CTX per call, which OpenSSL 3 allows on a shared, unmodified key.
    fileprivate let pointer: OpaquePointer

    package init() {
        guard let pointer = cossl_test_p256_generate() else { fatalError("P-256 key generation failed") }
        self.pointer = pointer
    }

    deinit { cossl_key_free(pointer) }

    /// X9.62 uncompressed point, 65 bytes.
    package var publicPoint: [UInt8] {
        var point = [UInt8](repeating: 0, count: 65)
        let ok = point.withUnsafeMutableBufferPointer { cossl_test_p256_public_point(pointer, $0.baseAddress) }
        precondition(ok == 1)
        return point
    }

    /// ECDSA P-256 SHA-256 of `message`, DER.
    package func signDER(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 80)
        let length = message.withUnsafeBufferPointer { m in
            out.withUnsafeMutableBufferPointer { cossl_test_sign_es256_der(pointer, m.baseAddress, m.count, $0.baseAddress, $0.count) }
        }
        precondition(length > 0)
        return Array(out.prefix(length))
    }

    /// A certificate for this key's public half, signed by `issuer` (DER).
    package func certificate(subject: String, issuer: TestP256Key, issuerName: String, serial: UInt64, notBefore: Int64, notAfter: Int64,
                             isCA: Bool, extensionOID: String? = nil, extensionValue: [UInt8] = []) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 4096)
        let length = extensionValue.withUnsafeBufferPointer { value in
            out.withUnsafeMutableBufferPointer { o in
                cossl_test_issue_certificate(pointer, subject, issuer.pointer, issuerName, serial, notBefore, notAfter, isCA ? 1 : 0,
                                             extensionOID, value.baseAddress, value.count, o.baseAddress, o.count)
            }
        }
        precondition(length > 0, "certificate issuing failed")
        return Array(out.prefix(length))
    }
}

extension TestP256Key {
    /// CMS SignedData over `content` signed with this key, whose certificate is `certificate`, carrying `chain`.
    package func cmsSign(_ content: [UInt8], certificate: [UInt8], chain: [[UInt8]]) -> [UInt8] {
        let extra = Array(chain.joined())
        let lengths = chain.map(\.count)
        var out = [UInt8](repeating: 0, count: content.count + extra.count + certificate.count + 1024)
        let length = certificate.withUnsafeBufferPointer { c in
            extra.withUnsafeBufferPointer { e in
                lengths.withUnsafeBufferPointer { l in
                    content.withUnsafeBufferPointer { d in
                        out.withUnsafeMutableBufferPointer { o in
                            cossl_test_cms_sign(c.baseAddress, c.count, pointer, e.baseAddress, l.baseAddress, l.count,
                                                d.baseAddress, d.count, o.baseAddress, o.count)
                        }
                    }
                }
            }
        }
        precondition(length > 0, "CMS signing failed")
        return Array(out.prefix(length))
    }
}

/// PEM text of a DER certificate.
package func testCertificatePEM(_ der: [UInt8]) -> [UInt8] {
    var out = [CChar](repeating: 0, count: der.count * 2 + 128)
    let length = der.withUnsafeBufferPointer { d in
        out.withUnsafeMutableBufferPointer { cossl_test_certificate_pem(d.baseAddress, d.count, $0.baseAddress, $0.count) }
    }
    precondition(length > 0)
    return out.prefix(length).map { UInt8(bitPattern: $0) }
}
