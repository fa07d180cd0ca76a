// The only door to OpenSSL (libcrypto) in SSE Relay: SHA-256, HMAC-SHA256, public keys built from JWK
// parameters, RS256/ES256 verification, and test-only signing. Everything OpenSSL spells as a macro, a
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

// ---- Signing: used by the tests to make tokens in-process; the relay never signs. ----

/// A private key from PEM text (PKCS#8 or traditional). NULL on failure.
EVP_PKEY *cossl_private_key_from_pem(const char *pem, size_t length);

/// RS256 signature into `out` (room for `capacity` bytes); returns its length, or 0 on failure.
size_t cossl_sign_rs256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity);

/// ES256 signature as raw r||s (64 bytes, left-padded). Returns 1 on success, 0 on failure.
int cossl_sign_es256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t out[64]);

#endif
