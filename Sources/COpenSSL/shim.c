// See include/COpenSSL.h (including how macOS points the build at Homebrew's OpenSSL).
#include "COpenSSL.h"

#include <limits.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/cms.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

// OpenSSL's exit-time cleanup is turned off, before anything else in the process calls OpenSSL (the first
// OPENSSL_init_crypto decides; libcurl and every call below initialise OpenSSL without this flag).
// That cleanup (OPENSSL_cleanup, an atexit handler OpenSSL registers on first use) deletes the thread-local key
// whose destructor frees a thread's error queue (ERR_STATE, 904 bytes, made by the first error-queue call on a
// thread: curl's TLS on an event loop's Dispatch worker, ERR_clear_error here). A thread that exits after it,
// while the process exits, never frees its queue: LeakSanitizer reported two (1 808 bytes, allocated by
// CRYPTO_zalloc) in one run of `make sanitize`, when two Dispatch workers ended in that window. The cleanup also
// frees tables that threads still running at exit may be using. The memory goes back with the process.
// Tests/sanitizers/openssl_exit_thread.c makes such a thread end after the atexit handlers.
__attribute__((constructor)) static void cossl_keep_openssl_until_exit(void) {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

int cossl_tls_has_pending(const void *ssl) {
    return SSL_has_pending((const SSL *)ssl) == 1;
}

int cossl_tls_alpn_is_h2(const void *ssl) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected((const SSL *)ssl, &protocol, &length);
    return length == 2 && protocol[0] == 'h' && protocol[1] == '2';
}

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

// The P-256 group as a parameters-only key, made once per process: a public key copies it and sets its point.
// Building each key from parameters instead (EVP_PKEY_fromdata) rebuilds and checks the whole group every time:
// 190 000 instructions per key against about 60 000 (an asserted request pays one). Never freed: it lives as long
// as the process, as OpenSSL's own tables do.
static CRYPTO_ONCE p256_once = CRYPTO_ONCE_STATIC_INIT;
static EVP_PKEY *p256_group = NULL;

static void make_p256_group(void) {
    char group[] = "prime256v1";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx != NULL && EVP_PKEY_paramgen_init(ctx) == 1 && EVP_PKEY_CTX_set_params(ctx, params) == 1) {
        EVP_PKEY_paramgen(ctx, &p256_group);
    }
    EVP_PKEY_CTX_free(ctx);
}

// NULL unless 04 || x || y is a point on P-256 (EVP_PKEY_set1_encoded_public_key decodes and checks it).
EVP_PKEY *cossl_p256_public_key(const uint8_t x[32], const uint8_t y[32]) {
    uint8_t point[65];
    point[0] = 0x04; // uncompressed SEC1 point: 04 || x || y
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    if (CRYPTO_THREAD_run_once(&p256_once, make_p256_group) != 1 || p256_group == NULL) return NULL;
    EVP_PKEY *key = EVP_PKEY_new();
    if (key == NULL || EVP_PKEY_copy_parameters(key, p256_group) != 1
        || EVP_PKEY_set1_encoded_public_key(key, point, sizeof point) != 1) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
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

int cossl_verify_es256_der(EVP_PKEY *key, const uint8_t *message, size_t length, const uint8_t *signature, size_t signature_length) {
    if (cossl_key_kind(key) != 2) return 0;
    return verify_sha256(key, message, length, signature, signature_length);
}

// ---- X.509 ----

// One DER certificate, NULL unless `der` is exactly one certificate with nothing after it.
static X509 *x509_from_der(const uint8_t *der, size_t length) {
    const unsigned char *cursor = der;
    X509 *cert;
    if (der == NULL || length == 0 || length > LONG_MAX) return NULL;
    cert = d2i_X509(NULL, &cursor, (long)length);
    if (cert != NULL && cursor != der + length) {
        X509_free(cert);
        return NULL;
    }
    return cert;
}

int cossl_x509_pem_to_der(const char *pem, size_t length, uint8_t *out, size_t capacity, size_t *lengths, size_t max_count) {
    int count = 0;
    size_t used = 0;
    unsigned long error;
    X509 *cert;
    BIO *bio;
    if (length > INT32_MAX) return 0;
    bio = BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return 0;
    ERR_clear_error();
    while ((cert = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        int der_length = i2d_X509(cert, NULL);
        unsigned char *cursor = out + used;
        if (der_length <= 0 || (size_t)count >= max_count || (size_t)der_length > capacity - used) {
            X509_free(cert);
            BIO_free(bio);
            ERR_clear_error();
            return der_length <= 0 ? 0 : -1;
        }
        i2d_X509(cert, &cursor);
        lengths[count++] = (size_t)der_length;
        used += (size_t)der_length;
        X509_free(cert);
    }
    // The loop ends at the end of the text (no further start line) or at a block that does not parse.
    error = ERR_peek_last_error();
    BIO_free(bio);
    ERR_clear_error();
    if (error != 0 && !(ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE)) return 0;
    return count;
}

int cossl_x509_parse_check(const uint8_t *der, size_t length) {
    X509 *cert = x509_from_der(der, length);
    X509_free(cert);
    return cert != NULL;
}

// Parses `count` DER certificates laid end to end into a new stack; NULL when one does not parse.
static STACK_OF(X509) *x509_stack(const uint8_t *ders, const size_t *lengths, size_t count) {
    size_t offset = 0;
    STACK_OF(X509) *stack = sk_X509_new_null();
    if (stack == NULL) return NULL;
    for (size_t i = 0; i < count; i++) {
        X509 *cert = x509_from_der(ders + offset, lengths[i]);
        if (cert == NULL || sk_X509_push(stack, cert) <= 0) {
            X509_free(cert);
            sk_X509_pop_free(stack, X509_free);
            return NULL;
        }
        offset += lengths[i];
    }
    return stack;
}

// 1 when `cert` is one of `chain` (X509_cmp: the same DER bytes).
static int on_path(X509 *cert, STACK_OF(X509) *chain) {
    for (int i = 0; i < sk_X509_num(chain); i++)
        if (X509_cmp(cert, sk_X509_value(chain, i)) == 0) return 1;
    return 0;
}

// Verifies `leaf` through `untrusted` to one of `trusted` at `at_unix_seconds`. Every certificate of `untrusted`
// must end up on the verified path: a certificate sent along but not used is refused (it would be bytes no
// signature covers). Returns one of COSSL_CHAIN_*.
static int verify_path(X509 *leaf, STACK_OF(X509) *untrusted, STACK_OF(X509) *trusted, int64_t at_unix_seconds) {
    int result = COSSL_CHAIN_INVALID;
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    if (leaf == NULL || untrusted == NULL || trusted == NULL || store == NULL || ctx == NULL || sk_X509_num(trusted) == 0) goto done;
    for (int i = 0; i < sk_X509_num(trusted); i++)
        if (X509_STORE_add_cert(store, sk_X509_value(trusted, i)) != 1) goto done;
    if (X509_STORE_CTX_init(ctx, store, leaf, untrusted) != 1) goto done;
    // The given time, never the clock; X509_VERIFY_PARAM_set_time also turns on X509_V_FLAG_USE_CHECK_TIME.
    // X509_V_FLAG_PARTIAL_CHAIN stays off: the path has to end at a trusted root.
    X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), (time_t)at_unix_seconds);
    ERR_clear_error();
    if (X509_verify_cert(ctx) == 1) {
        // A chain of one would be a trusted root presented as the leaf.
        STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(ctx);
        int all_used = chain != NULL && sk_X509_num(chain) >= 2;
        for (int i = 0; all_used && i < sk_X509_num(untrusted); i++) all_used = on_path(sk_X509_value(untrusted, i), chain);
        if (all_used) result = COSSL_CHAIN_OK;
    } else {
        int error = X509_STORE_CTX_get_error(ctx);
        if (error == X509_V_ERR_CERT_NOT_YET_VALID || error == X509_V_ERR_CERT_HAS_EXPIRED) result = COSSL_CHAIN_TIME;
    }
    ERR_clear_error();
done:
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return result;
}

int cossl_x509_verify_chain(const uint8_t *leaf, size_t leaf_length,
                            const uint8_t *intermediates, const size_t *intermediate_lengths, size_t intermediate_count,
                            const uint8_t *roots, const size_t *root_lengths, size_t root_count,
                            int64_t at_unix_seconds) {
    X509 *leaf_cert = x509_from_der(leaf, leaf_length);
    STACK_OF(X509) *untrusted = x509_stack(intermediates, intermediate_lengths, intermediate_count);
    STACK_OF(X509) *trusted = x509_stack(roots, root_lengths, root_count);
    int result = verify_path(leaf_cert, untrusted, trusted, at_unix_seconds);
    sk_X509_pop_free(trusted, X509_free);
    sk_X509_pop_free(untrusted, X509_free);
    X509_free(leaf_cert);
    return result;
}

int cossl_cms_verify(const uint8_t *der, size_t length, const uint8_t *roots, const size_t *root_lengths, size_t root_count,
                     const char *signer_extension_oid, int64_t at_unix_seconds, uint8_t *content, size_t capacity,
                     size_t *content_length) {
    int result = 0;
    const unsigned char *cursor = der;
    ASN1_OBJECT *marker = NULL;
    CMS_ContentInfo *cms = NULL;
    STACK_OF(X509) *signers = NULL, *carried = NULL;
    STACK_OF(X509) *trusted = x509_stack(roots, root_lengths, root_count);
    BIO *out = BIO_new(BIO_s_mem());
    char *data = NULL;
    long data_length;
    *content_length = 0;
    if (der == NULL || length == 0 || length > LONG_MAX || trusted == NULL || out == NULL) goto done;
    cms = d2i_CMS_ContentInfo(NULL, &cursor, (long)length);
    if (cms == NULL || cursor != der + length) goto done;
    // The signature over the content here; the signer's path below, through verify_path, so that the time is
    // the given one and every certificate the message carries must be on that path.
    ERR_clear_error();
    if (CMS_verify(cms, NULL, NULL, NULL, out, CMS_BINARY | CMS_NO_SIGNER_CERT_VERIFY) != 1) goto done;
    signers = CMS_get0_signers(cms);
    carried = CMS_get1_certs(cms);
    if (signers == NULL || sk_X509_num(signers) != 1 || carried == NULL) goto done;
    if (verify_path(sk_X509_value(signers, 0), carried, trusted, at_unix_seconds) != COSSL_CHAIN_OK) goto done;
    if (signer_extension_oid != NULL) {
        marker = OBJ_txt2obj(signer_extension_oid, 1);
        if (marker == NULL || X509_get_ext_by_OBJ(sk_X509_value(signers, 0), marker, -1) < 0) goto done;
    }
    data_length = BIO_get_mem_data(out, &data);
    if (data_length < 0 || (size_t)data_length > capacity) goto done;
    if (data_length > 0) memcpy(content, data, (size_t)data_length);
    *content_length = (size_t)data_length;
    result = 1;
done:
    ERR_clear_error();
    ASN1_OBJECT_free(marker);
    sk_X509_free(signers); // CMS_get0_signers: the certificates are the message's, the stack is ours
    sk_X509_pop_free(carried, X509_free);
    BIO_free(out);
    CMS_ContentInfo_free(cms);
    sk_X509_pop_free(trusted, X509_free);
    return result;
}

long cossl_x509_extension_value(const uint8_t *der, size_t length, const char *oid, uint8_t *out, size_t capacity) {
    long result = -1;
    int index;
    const ASN1_OCTET_STRING *value;
    X509 *cert = x509_from_der(der, length);
    ASN1_OBJECT *object = OBJ_txt2obj(oid, 1);
    if (cert == NULL || object == NULL) goto done;
    index = X509_get_ext_by_OBJ(cert, object, -1);
    // Absent, or present twice (which would leave the reader to pick one): both refused.
    if (index < 0 || X509_get_ext_by_OBJ(cert, object, index) >= 0) goto done;
    value = X509_EXTENSION_get_data(X509_get_ext(cert, index));
    if (value == NULL) goto done;
    if ((size_t)ASN1_STRING_length(value) > capacity) {
        result = -2;
        goto done;
    }
    memcpy(out, ASN1_STRING_get0_data(value), (size_t)ASN1_STRING_length(value));
    result = ASN1_STRING_length(value);
done:
    ASN1_OBJECT_free(object);
    X509_free(cert);
    return result;
}

// The affine coordinates of a P-256 key as 04 || x || y, whatever point form the key was decoded from.
static int p256_point(const EVP_PKEY *key, uint8_t out[65]) {
    BIGNUM *x = NULL, *y = NULL;
    int ok;
    if (cossl_key_kind(key) != 2) return 0;
    ok = EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1
        && EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1
        && BN_bn2binpad(x, out + 1, 32) == 32 && BN_bn2binpad(y, out + 33, 32) == 32;
    out[0] = 0x04;
    BN_free(x);
    BN_free(y);
    return ok;
}

int cossl_x509_p256_public_key(const uint8_t *der, size_t length, uint8_t out[65]) {
    int ok;
    X509 *cert = x509_from_der(der, length);
    if (cert == NULL) return 0;
    ok = p256_point(X509_get0_pubkey(cert), out);
    X509_free(cert);
    return ok;
}

// ---- Test-only: keys and certificates for the software App Attest device. ----

EVP_PKEY *cossl_test_p256_generate(void) { return EVP_EC_gen("P-256"); }

int cossl_test_p256_public_point(EVP_PKEY *key, uint8_t out[65]) { return p256_point(key, out); }

size_t cossl_test_sign_es256_der(EVP_PKEY *key, const uint8_t *message, size_t length, uint8_t *out, size_t capacity) {
    if (cossl_key_kind(key) != 2) return 0;
    return sign_sha256(key, message, length, out, capacity);
}

// Adds one extension from its OpenSSL configuration text (X509V3_EXT_conf_nid); 1 on success.
static int add_conf_extension(X509 *cert, int nid, const char *value) {
    X509V3_CTX ctx;
    X509_EXTENSION *extension;
    int ok;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, NULL, cert, NULL, NULL, 0);
    extension = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (extension == NULL) return 0;
    ok = X509_add_ext(cert, extension, -1);
    X509_EXTENSION_free(extension);
    return ok;
}

size_t cossl_test_issue_certificate(EVP_PKEY *subject_key, const char *subject_cn, EVP_PKEY *issuer_key, const char *issuer_cn,
                                    uint64_t serial, int64_t not_before, int64_t not_after, int is_ca,
                                    const char *extension_oid, const uint8_t *extension_value, size_t extension_length,
                                    uint8_t *out, size_t capacity) {
    size_t result = 0;
    int der_length;
    unsigned char *cursor = out;
    X509 *cert = X509_new();
    if (cert == NULL || extension_length > INT32_MAX) goto done;
    if (X509_set_version(cert, X509_VERSION_3) != 1
        || ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert), serial) != 1
        || ASN1_TIME_set(X509_getm_notBefore(cert), (time_t)not_before) == NULL
        || ASN1_TIME_set(X509_getm_notAfter(cert), (time_t)not_after) == NULL
        || X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_UTF8, (const unsigned char *)subject_cn, -1, -1, 0) != 1
        || X509_NAME_add_entry_by_txt(X509_get_issuer_name(cert), "CN", MBSTRING_UTF8, (const unsigned char *)issuer_cn, -1, -1, 0) != 1
        || X509_set_pubkey(cert, subject_key) != 1)
        goto done;
    if (!add_conf_extension(cert, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE")
        || !add_conf_extension(cert, NID_key_usage, is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature"))
        goto done;
    if (extension_oid != NULL) {
        int ok = 0;
        ASN1_OBJECT *object = OBJ_txt2obj(extension_oid, 1);
        ASN1_OCTET_STRING *value = ASN1_OCTET_STRING_new();
        X509_EXTENSION *extension = NULL;
        if (object != NULL && value != NULL && ASN1_OCTET_STRING_set(value, extension_value, (int)extension_length) == 1)
            extension = X509_EXTENSION_create_by_OBJ(NULL, object, 0, value);
        if (extension != NULL) ok = X509_add_ext(cert, extension, -1);
        X509_EXTENSION_free(extension);
        ASN1_OCTET_STRING_free(value);
        ASN1_OBJECT_free(object);
        if (!ok) goto done;
    }
    // A DER ECDSA signature is 70 to 72 bytes as r and s happen to need a leading zero: signed again until it
    // is 72, so that a certificate's size depends on its contents only (a test sizes an attestation to the byte).
    for (int attempt = 0;; attempt++) {
        const ASN1_BIT_STRING *signature = NULL;
        if (X509_sign(cert, issuer_key, EVP_sha256()) <= 0) goto done;
        X509_get0_signature(&signature, NULL, cert);
        if (signature == NULL || ASN1_STRING_length(signature) == 72 || attempt == 200) break;
    }
    der_length = i2d_X509(cert, NULL);
    if (der_length <= 0 || (size_t)der_length > capacity) goto done;
    i2d_X509(cert, &cursor);
    result = (size_t)der_length;
done:
    X509_free(cert);
    return result;
}

size_t cossl_test_certificate_pem(const uint8_t *der, size_t length, char *out, size_t capacity) {
    size_t result = 0;
    char *text = NULL;
    long text_length;
    X509 *cert = x509_from_der(der, length);
    BIO *bio = BIO_new(BIO_s_mem());
    if (cert != NULL && bio != NULL && PEM_write_bio_X509(bio, cert) == 1) {
        text_length = BIO_get_mem_data(bio, &text);
        if (text_length > 0 && (size_t)text_length < capacity) {
            memcpy(out, text, (size_t)text_length);
            out[text_length] = 0;
            result = (size_t)text_length;
        }
    }
    BIO_free(bio);
    X509_free(cert);
    return result;
}

size_t cossl_test_cms_sign(const uint8_t *signer_der, size_t signer_length, EVP_PKEY *key,
                           const uint8_t *extra, const size_t *extra_lengths, size_t extra_count,
                           const uint8_t *content, size_t content_length, uint8_t *out, size_t capacity) {
    size_t result = 0;
    int der_length;
    unsigned char *cursor = out;
    CMS_ContentInfo *cms = NULL;
    X509 *signer = x509_from_der(signer_der, signer_length);
    STACK_OF(X509) *certs = x509_stack(extra, extra_lengths, extra_count);
    BIO *data = content_length <= INT32_MAX ? BIO_new_mem_buf(content, (int)content_length) : NULL;
    if (signer == NULL || certs == NULL || data == NULL) goto done;
    // Signed again until the signature is 72 bytes, like a certificate's (see cossl_test_issue_certificate).
    for (int attempt = 0;; attempt++) {
        CMS_SignerInfo *info;
        ASN1_OCTET_STRING *signature;
        if (BIO_reset(data) != 1) goto done;
        CMS_ContentInfo_free(cms);
        cms = CMS_sign(signer, key, certs, data, CMS_BINARY | CMS_NOATTR);
        if (cms == NULL) goto done;
        info = sk_CMS_SignerInfo_value(CMS_get0_SignerInfos(cms), 0);
        signature = info != NULL ? CMS_SignerInfo_get0_signature(info) : NULL;
        if (signature == NULL || ASN1_STRING_length(signature) == 72 || attempt == 200) break;
    }
    der_length = i2d_CMS_ContentInfo(cms, NULL);
    if (der_length <= 0 || (size_t)der_length > capacity) goto done;
    i2d_CMS_ContentInfo(cms, &cursor);
    result = (size_t)der_length;
done:
    CMS_ContentInfo_free(cms);
    BIO_free(data);
    sk_X509_pop_free(certs, X509_free);
    X509_free(signer);
    return result;
}
