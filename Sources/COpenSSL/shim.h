#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
// Only what Swift cannot call: OpenSSL's function-like macros, stack macros and SSL_OP_BIT constants.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>
#include <openssl/pem.h>
#include <time.h>

static inline long copenssl_ctx_set_min_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_min_proto_version(c, v); }
static inline long copenssl_ctx_set_mode(SSL_CTX *c, long m) { return SSL_CTX_set_mode(c, m); }
static inline long copenssl_set_tlsext_host_name(SSL *s, const char *n) { return SSL_set_tlsext_host_name(s, n); }
static inline uint64_t copenssl_default_options(void) {
    return SSL_OP_ALL | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION;
}
static inline long copenssl_ctx_add0_chain_cert(SSL_CTX *c, X509 *x) { return SSL_CTX_add0_chain_cert(c, x); }
static inline int copenssl_sk_X509_num(const STACK_OF(X509) *s) { return sk_X509_num(s); }
static inline X509 *copenssl_sk_X509_value(const STACK_OF(X509) *s, int i) { return sk_X509_value(s, i); }
static inline void copenssl_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
static inline void copenssl_sk_X509_pop_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }
static inline void copenssl_free(void *p) { OPENSSL_free(p); }
/// Seconds since the epoch of an ASN1_TIME, or -1 when it cannot be converted.
static inline long long copenssl_asn1_time_epoch(const ASN1_TIME *t) {
    struct tm tm;
    if (ASN1_TIME_to_tm(t, &tm) != 1) return -1;
    return (long long)timegm(&tm);
}
/// The server's ALPN choice: first of the server's protocols that the client also offered.
static inline int copenssl_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                       const unsigned char *in, unsigned int inlen, void *arg) {
    const unsigned char *server = (const unsigned char *)arg;
    unsigned int serverLen = server[0] | (server[1] << 8);
    unsigned char *sel = NULL; unsigned char selLen = 0;
    if (SSL_select_next_proto(&sel, &selLen, server + 2, serverLen, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel; *outlen = selLen;
    return SSL_TLSEXT_ERR_OK;
}
static inline void copenssl_ctx_set_alpn_select(SSL_CTX *c, unsigned char *lengthPrefixedList) {
    SSL_CTX_set_alpn_select_cb(c, copenssl_alpn_select, lengthPrefixedList);
}
#endif
