// The only door to OpenSSL (libcrypto) in SSE Relay: SHA-256, HMAC-SHA256, public keys built from JWK
// parameters, RS256/ES256 verification, X.509 parsing and chain verification (App Attest), test-only
// signing and certificate issuing, and one look into libssl (bytes a provider connection's TLS holds). Everything OpenSSL spells as a macro, a
// variadic call or a multi-step builder is wrapped here so Swift sees small typed functions.
//
// Targets OpenSSL 3.0 or later and uses no API deprecated there (OSSL_PARAM_BLD + EVP_PKEY_fromdata instead of
// RSA/EC_KEY), so the build is warning-free without any pragma.
//
// macOS: OpenSSL comes from Homebrew, which is not on the default search paths. SwiftPM forbids unsafeFlags in
// packages used as dependencies, so the paths are given on the command line instead:
//   swift build -Xcc -I/opt/homebrew/opt/openssl@3/include -Xlinker -L/opt/homebrew/opt/openssl@3/lib
// (/usr/local/opt/openssl@3 on Intel Macs). Nothing else in the package needs to change.
#ifndef SSE_RELAY_COPENSSL_H
#define SSE_RELAY_COPENSSL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

/// SHA-256 of `data`; writes 32 bytes to `out`. Returns 1 on success, 0 on failure.
int cossl_sha256(const uint8_t *data, size_t length, uint8_t out[32]);

/// HMAC-SHA256 of `data` under `key`; writes 32 bytes to `out`. Returns 1 on success, 0 on failure.
int cossl_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t out[32]);

/// Whether the TLS connection `ssl` (an `SSL *`, libcurl's for a provider connection) holds bytes read from its
/// socket and not yet taken by the application, decrypted or not (SSL_has_pending): 1 or 0.
int cossl_tls_has_pending(const void *ssl);

/// Whether the TLS connection `ssl` (an `SSL *`) agreed on HTTP/2 by ALPN ("h2"): 1 or 0.
int cossl_tls_alpn_is_h2(const void *ssl);

/// Constant-time equality of two buffers of `length` bytes: 1 when equal, 0 otherwise (CRYPTO_memcmp).
int cossl_equal(const uint8_t *a, const uint8_t *b, size_t length);

/// An RSA public key from the big-endian modulus and exponent (JWK "n" and "e"). NULL when they are not a key.
EVP_PKEY *cossl_rsa_public_key(const uint8_t *n, size_t n_length, const uint8_t *e, size_t e_length);

/// A P-256 public key from its 32-byte affine coordinates (JWK "x" and "y"). NULL when the point is not on the
/// curve (OpenSSL checks this while decoding the point).
EVP_PKEY *cossl_p256_public_key(const uint8_t x[32], const uint8_t y[32]);

/// Kind of a key, for matching a JWS "alg" to the key type: 1 RSA, 2 EC on P-256, 0 anything else.
int cossl_key_kind(const EVP_PKEY *key);

/// Size of the key in bits (the RSA modulus length), 0 when unknown.
int cossl_key_bits(const EVP_PKEY *key);

void cossl_key_free(EVP_PKEY *key);

/// RSASSA-PKCS1-v1_5 with SHA-256 (RS256). 1 when the signature is valid, 0 otherwise.
int cossl_verify_rs256(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t *signature, size_t signature_length);

/// ECDSA P-256 with SHA-256 (ES256) over a JWS signature, which is raw r||s (64 bytes, RFC 7518 section 3.4):
/// converted to DER (ECDSA_SIG_set0 + i2d_ECDSA_SIG) for OpenSSL. 1 when valid, 0 otherwise.
int cossl_verify_es256(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t signature[64]);

/// ECDSA P-256 with SHA-256 over a DER-encoded signature (ECDSA-Sig-Value, RFC 3279 section 2.2.3), the form
/// App Attest assertions carry. 1 when valid, 0 otherwise.
int cossl_verify_es256_der(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t *signature, size_t signature_length);

// ---- X.509 (App Attest): certificates are passed as DER bytes; nothing is kept between calls. ----

/// Converts PEM text holding one or more certificates to DER. Each certificate's DER is written to `out` one
/// after the other (room for `capacity` bytes) and its length to `lengths` (room for `max_count`). Returns the
/// number of certificates, 0 when there is none or a CERTIFICATE block does not parse, -1 when the room is too
/// small. Blocks of other kinds (a key, say) are skipped, as PEM_read_bio_X509 does.
int cossl_x509_pem_to_der(const char *pem, size_t length, uint8_t *out, size_t capacity, size_t *lengths, size_t max_count);

/// 1 when `der` is exactly one well-formed certificate (no trailing bytes), 0 otherwise.
int cossl_x509_parse_check(const uint8_t *der, size_t length);

/// Outcome of `cossl_x509_verify_chain`.
enum {
    COSSL_CHAIN_OK = 0,
    /// A certificate of the chain is not yet valid or has expired at the given time.
    COSSL_CHAIN_TIME = 1,
    /// Anything else: an unparsable certificate, a broken signature, no path to a trusted root, a CA flag missing.
    COSSL_CHAIN_INVALID = 2,
};

/// Verifies `leaf` up to one of the `root_count` trusted roots through the untrusted intermediates, each
/// certificate valid at `at_unix_seconds` (X509_VERIFY_PARAM_set_time; the machine's clock is never read).
/// Intermediates and roots are DER certificates laid end to end in one buffer each, with their lengths in
/// `*_lengths`. Partial chains are refused (the path must end at one of the roots), and so are a leaf that is
/// itself a trusted root and an intermediate that is not on the verified path. Returns one of COSSL_CHAIN_*.
int cossl_x509_verify_chain(const uint8_t *leaf, size_t leaf_length,
                            const uint8_t *intermediates, const size_t *intermediate_lengths, size_t intermediate_count,
                            const uint8_t *roots, const size_t *root_lengths, size_t root_count,
                            int64_t at_unix_seconds);

/// Verifies a CMS SignedData (PKCS #7, DER or BER; App Attest's receipt) whose signer certificate chains, through
/// the certificates the message carries, to one of the `root_count` trusted roots (DER, laid end to end), each
/// valid at `at_unix_seconds`. The signed content is copied to `content` (room for `capacity`) and its length to
/// `content_length`. Exactly one signer; every certificate the message carries must be on the signer's verified
/// path. With `signer_extension_oid` (dotted; NULL: none), the signer's certificate must carry that extension: a
/// root trusted for one kind of signer also anchors every other certificate its CAs issued. 1 when valid, 0
/// otherwise (also when the content does not fit).
int cossl_cms_verify(const uint8_t *der, size_t length, const uint8_t *roots, const size_t *root_lengths, size_t root_count,
                     const char *signer_extension_oid, int64_t at_unix_seconds, uint8_t *content, size_t capacity,
                     size_t *content_length);

/// The value (the bytes inside the extnValue OCTET STRING) of the certificate's extension with the dotted `oid`,
/// copied to `out` (room for `capacity`). Returns its length, -1 when the certificate does not parse, carries
/// no such extension or carries it twice, -2 when the room is too small.
long cossl_x509_extension_value(const uint8_t *der, size_t length, const char *oid, uint8_t *out, size_t capacity);

/// The certificate's P-256 public key as an X9.62 uncompressed point (04 || x || y). 1 on success, 0 when the
/// certificate does not parse or its key is not a P-256 key.
int cossl_x509_p256_public_key(const uint8_t *der, size_t length, uint8_t out[65]);

// ---- Signing: used by the tests to make tokens in-process; the relay never signs. ----

/// A private key from PEM text (PKCS#8 or traditional). NULL on failure.
EVP_PKEY *cossl_private_key_from_pem(const char *pem, size_t length);

/// RS256 signature into `out` (room for `capacity` bytes); returns its length, or 0 on failure.
size_t cossl_sign_rs256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity);

/// ES256 signature as raw r||s (64 bytes, left-padded). Returns 1 on success, 0 on failure.
int cossl_sign_es256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t out[64]);

/// A fresh P-256 private key (EVP_EC_gen). NULL on failure.
EVP_PKEY *cossl_test_p256_generate(void);

/// The key's public point, X9.62 uncompressed (65 bytes). 1 on success, 0 when it is not a P-256 key.
int cossl_test_p256_public_point(EVP_PKEY *key, uint8_t out[65]);

/// ECDSA P-256 SHA-256 signature in DER into `out` (room for `capacity`); returns its length, 0 on failure.
size_t cossl_test_sign_es256_der(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity);

/// Issues an X.509 v3 certificate for `subject_key` (its public half) with the common name `subject_cn`,
/// signed by `issuer_key` (ECDSA with SHA-256) under the name `issuer_cn`, valid from `not_before` to
/// `not_after` (Unix seconds). `is_ca` adds a critical basicConstraints CA:TRUE and keyUsage keyCertSign|cRLSign;
/// otherwise basicConstraints CA:FALSE and keyUsage digitalSignature. When `extension_oid` is not NULL, an
/// extension with that dotted OID and `extension_value` as its value is added. DER into `out`; returns its
/// length, 0 on failure.
size_t cossl_test_issue_certificate(EVP_PKEY *subject_key, const char *subject_cn, EVP_PKEY *issuer_key, const char *issuer_cn,
                                    uint64_t serial, int64_t not_before, int64_t not_after, int is_ca,
                                    const char *extension_oid, const uint8_t *extension_value, size_t extension_length,
                                    uint8_t *out, size_t capacity);

/// CMS SignedData (DER) over `content` (binary, no signed attributes, as Apple's receipts), signed by `key`
/// whose certificate is `signer_der`, carrying `extra` certificates (DER, laid end to end, lengths in
/// `extra_lengths`). DER into `out`; returns its length, 0 on failure.
size_t cossl_test_cms_sign(const uint8_t *signer_der, size_t signer_length, EVP_PKEY *key,
                           const uint8_t *extra, const size_t *extra_lengths, size_t extra_count,
                           const uint8_t *content, size_t content_length, uint8_t *out, size_t capacity);

/// A certificate (DER) as PEM text into `out` (room for `capacity`, NUL-terminated); returns the text length,
/// 0 on failure.
size_t cossl_test_certificate_pem(const uint8_t *der, size_t length, char *out, size_t capacity);

#endif
