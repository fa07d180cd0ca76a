// See include/COpenSSL.h (including how macOS points the build at Homebrew's OpenSSL).
#include "COpenSSL.h"

#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

int cossl_sha256(const uint8_t *data, size_t length, uint8_t out[32]) {
    unsigned int size = 0;
    return EVP_Digest(data, length, out, &size, EVP_sha256(), NULL) == 1 && size == 32;
}

int cossl_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t out[32]) {
    // The one-shot HMAC() is not deprecated in 3.0 (only HMAC_CTX is). A zero-length key must still be a
    // non-NULL pointer for OpenSSL.
    static const uint8_t empty = 0;
    unsigned int size = 0;
    if (key_length > INT32_MAX) return 0;
    return HMAC(EVP_sha256(), key_length ? key : &empty, (int)key_length, data, length, out, &size) != NULL && size == 32;
}

int cossl_equal(const uint8_t *a, const uint8_t *b, size_t length) {
    return CRYPTO_memcmp(a, b, length) == 0;
}

// Builds a public key of `type` ("RSA" or "EC") from parameters; takes ownership of nothing.
static EVP_PKEY *key_from_params(const char *type, OSSL_PARAM *params) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (ctx == NULL) return NULL;
    if (EVP_PKEY_fromdata_init(ctx) != 1 || EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return key;
}

EVP_PKEY *cossl_rsa_public_key(const uint8_t *n, size_t n_length, const uint8_t *e, size_t e_length) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = NULL;
    BIGNUM *bn_n = NULL, *bn_e = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    if (n_length == 0 || e_length == 0 || n_length > INT32_MAX || e_length > INT32_MAX) return NULL;
    bn_n = BN_bin2bn(n, (int)n_length, NULL);
    bn_e = BN_bin2bn(e, (int)e_length, NULL);
    bld = OSSL_PARAM_BLD_new();
    if (bn_n == NULL || bn_e == NULL || bld == NULL) goto done;
    // An even or tiny modulus, or an exponent below 3 or even, is not an RSA key worth building.
    if (!BN_is_odd(bn_n) || !BN_is_odd(bn_e) || BN_cmp(bn_e, BN_value_one()) <= 0) goto done;
    if (OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) != 1) goto done;
    if (OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) != 1) goto done;
    params = OSSL_PARAM_BLD_to_param(bld);
    if (params == NULL) goto done;
    key = key_from_params("RSA", params);
done:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn_n);
    BN_free(bn_e);
    return key;
}

EVP_PKEY *cossl_p256_public_key(const uint8_t x[32], const uint8_t y[32]) {
    uint8_t point[65];
    char group[] = "prime256v1";
    point[0] = 0x04; // uncompressed SEC1 point: 04 || x || y
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point),
        OSSL_PARAM_construct_end(),
    };
    return key_from_params("EC", params);
}

int cossl_key_kind(const EVP_PKEY *key) {
    if (key == NULL) return 0;
    if (EVP_PKEY_is_a(key, "RSA")) return 1;
    if (EVP_PKEY_is_a(key, "EC")) {
        char group[64] = {0};
        size_t size = 0;
        if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &size) == 1
            && strcmp(group, "prime256v1") == 0) return 2;
    }
    return 0;
}

int cossl_key_bits(const EVP_PKEY *key) {
    return key == NULL ? 0 : EVP_PKEY_get_bits(key);
}

void cossl_key_free(EVP_PKEY *key) { EVP_PKEY_free(key); }

// One digest-verify over a DER (ECDSA) or PKCS#1 (RSA) signature. A fresh EVP_MD_CTX per call, so one key can
// serve several threads at once (OpenSSL 3 guards a key's internal caches itself).
static int verify_sha256(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t *signature, size_t signature_length) {
    int ok = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return 0;
    if (EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1)
        ok = EVP_DigestVerify(ctx, signature, signature_length, message, length) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

int cossl_verify_rs256(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t *signature, size_t signature_length) {
    if (cossl_key_kind(key) != 1) return 0; // never an RSA verify with anything but an RSA key
    return verify_sha256(key, message, length, signature, signature_length);
}

int cossl_verify_es256(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t signature[64]) {
    int ok = 0;
    unsigned char *der = NULL;
    int der_length;
    BIGNUM *r, *s;
    ECDSA_SIG *sig;
    if (cossl_key_kind(key) != 2) return 0;
    sig = ECDSA_SIG_new();
    r = BN_bin2bn(signature, 32, NULL);
    s = BN_bin2bn(signature + 32, 32, NULL);
    if (sig == NULL || r == NULL || s == NULL) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return 0;
    }
    ECDSA_SIG_set0(sig, r, s); // sig owns r and s from here
    der_length = i2d_ECDSA_SIG(sig, &der);
    if (der_length > 0) ok = verify_sha256(key, message, length, der, (size_t)der_length);
    OPENSSL_free(der);
    ECDSA_SIG_free(sig);
    return ok;
}

EVP_PKEY *cossl_private_key_from_pem(const char *pem, size_t length) {
    EVP_PKEY *key;
    BIO *bio;
    if (length > INT32_MAX) return NULL;
    bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return NULL;
    key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return key;
}

// Digest-sign into `out`; returns the signature length or 0.
static size_t sign_sha256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity) {
    size_t size = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return 0;
    if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1
        && EVP_DigestSign(ctx, NULL, &size, message, length) == 1 && size <= capacity
        && EVP_DigestSign(ctx, out, &size, message, length) == 1) {
        EVP_MD_CTX_free(ctx);
        return size;
    }
    EVP_MD_CTX_free(ctx);
    return 0;
}

size_t cossl_sign_rs256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity) {
    if (cossl_key_kind(key) != 1) return 0;
    return sign_sha256(key, message, length, out, capacity);
}

int cossl_sign_es256(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t out[64]) {
    uint8_t der[128];
    const unsigned char *cursor = der;
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG *sig;
    int ok;
    size_t der_length;
    if (cossl_key_kind(key) != 2) return 0;
    der_length = sign_sha256(key, message, length, der, sizeof der);
    if (der_length == 0) return 0;
    sig = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
    if (sig == NULL) return 0;
    ECDSA_SIG_get0(sig, &r, &s);
    ok = BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32;
    ECDSA_SIG_free(sig);
    return ok;
}
