internal import COpenSSL

/// Thin typed calls into the COpenSSL shim: every use of OpenSSL in this module goes through here or `PublicKey`.
enum Crypto {
    static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = Array(bytes).withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { cossl_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        precondition(ok == 1, "SHA-256 failed: OpenSSL is unusable")
        return out
    }

    static func hmacSHA256(key: some Collection<UInt8>, message: some Collection<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let key = Array(key)
        let message = Array(message)
        let ok = key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer {
                    cossl_hmac_sha256(k.baseAddress, k.count, m.baseAddress, m.count, $0.baseAddress)
                }
            }
        }
        precondition(ok == 1, "HMAC-SHA256 failed: OpenSSL is unusable")
        return out
    }

    /// Constant-time comparison (CRYPTO_memcmp); false when the lengths differ.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in cossl_equal(x.baseAddress, y.baseAddress, x.count) == 1 }
        }
    }

    /// Constant-time comparison of `a` against `b[offset..<offset + a.count]`.
    static func equal(_ a: [UInt8], _ b: [UInt8], at offset: Int) -> Bool {
        precondition(offset >= 0 && offset + a.count <= b.count)
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in cossl_equal(x.baseAddress, y.baseAddress! + offset, x.count) == 1 }
        }
    }
}

/// A public key held by OpenSSL (an `EVP_PKEY`), built from JWK parameters (RFC 7518 section 6.2 and 6.3).
/// Its kind is fixed at construction, and each verify function refuses a key of the other kind, so no algorithm
/// can ever be checked with a key meant for another (RFC 8725 section 3.1).
final class PublicKey: @unchecked Sendable {
    // @unchecked Sendable invariant: `pointer` is set once in init, never mutated or exposed, and freed only in
    // deinit. Verification only reads the key through a fresh EVP_MD_CTX per call, which OpenSSL 3 allows from
    // several threads at once (openssl-threads(7): objects not being modified may be shared; the key's own
    // provider cache is guarded by the key's internal lock).
    enum Kind: Sendable { case rsa, p256 }

    private let pointer: OpaquePointer
    let kind: Kind
    let bits: Int

    private init(pointer: OpaquePointer, kind: Kind) {
        self.pointer = pointer
        self.kind = kind
        self.bits = Int(cossl_key_bits(pointer))
    }

    deinit { cossl_key_free(pointer) }

    /// nil when `n`/`e` do not make an RSA key.
    static func rsa(n: [UInt8], e: [UInt8]) -> PublicKey? {
        let pointer = n.withUnsafeBufferPointer { nb in
            e.withUnsafeBufferPointer { eb in cossl_rsa_public_key(nb.baseAddress, nb.count, eb.baseAddress, eb.count) }
        }
        guard let pointer else { return nil }
        guard cossl_key_kind(pointer) == 1 else {
            cossl_key_free(pointer)
            return nil
        }
        return PublicKey(pointer: pointer, kind: .rsa)
    }

    /// nil unless `x`/`y` are 32 bytes each and a point on P-256.
    static func p256(x: [UInt8], y: [UInt8]) -> PublicKey? {
        guard x.count == 32, y.count == 32 else { return nil }
        let pointer = x.withUnsafeBufferPointer { xb in
            y.withUnsafeBufferPointer { yb in cossl_p256_public_key(xb.baseAddress, yb.baseAddress) }
        }
        guard let pointer else { return nil }
        guard cossl_key_kind(pointer) == 2 else {
            cossl_key_free(pointer)
            return nil
        }
        return PublicKey(pointer: pointer, kind: .p256)
    }

    /// RS256 (RSASSA-PKCS1-v1_5 with SHA-256); always false for a P-256 key.
    func verifyRS256(message: ArraySlice<UInt8>, signature: [UInt8]) -> Bool {
        guard kind == .rsa, !signature.isEmpty else { return false }
        return message.withUnsafeBufferPointer { m in
            signature.withUnsafeBufferPointer { s in
                cossl_verify_rs256(pointer, m.baseAddress, m.count, s.baseAddress, s.count) == 1
            }
        }
    }

    /// ES256 over a raw r||s signature; always false for an RSA key or a signature that is not 64 bytes.
    func verifyES256(message: ArraySlice<UInt8>, signature: [UInt8]) -> Bool {
        guard kind == .p256, signature.count == 64 else { return false }
        return message.withUnsafeBufferPointer { m in
            signature.withUnsafeBufferPointer { s in
                cossl_verify_es256(pointer, m.baseAddress, m.count, s.baseAddress) == 1
            }
        }
    }
}
