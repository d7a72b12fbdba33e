#ifndef TETHER_COPENSSL_SHIM_H
#define TETHER_COPENSSL_SHIM_H

// OpenSSL 3 (Debian: libssl-dev): libcrypto for SCRAM's hashes, HMAC and PBKDF2; libssl for the
// sans-IO TLS session over memory BIOs.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

// Functions for what OpenSSL offers only as macros (Swift imports no function-like macros).

/// Sets the server name for SNI (SSL_set_tlsext_host_name). Returns 1 on success.
static inline int tether_ssl_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)name);
}

/// Sets the lowest protocol version (SSL_CTX_set_min_proto_version). Returns 1 on success.
static inline int tether_ssl_ctx_set_min_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, version, NULL);
}

/// Sets the highest protocol version (SSL_CTX_set_max_proto_version). Returns 1 on success.
static inline int tether_ssl_ctx_set_max_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, version, NULL);
}

#endif
