#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
// Only what Swift cannot call: OpenSSL's function-like macros and SSL_OP_BIT constants.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>
#include <openssl/pem.h>

static inline long copenssl_ctx_set_min_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_min_proto_version(c, v); }
static inline long copenssl_ctx_set_mode(SSL_CTX *c, long m) { return SSL_CTX_set_mode(c, m); }
static inline long copenssl_set_tlsext_host_name(SSL *s, const char *n) { return SSL_set_tlsext_host_name(s, n); }
static inline uint64_t copenssl_default_options(void) {
    return SSL_OP_ALL | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION;
}
#endif
