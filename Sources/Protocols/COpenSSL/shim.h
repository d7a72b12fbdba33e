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

/// The number of certificates the peer sent (0 when none), leaf first.
static inline int tether_ssl_peer_chain_count(const SSL *ssl) {
    STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
    return chain ? sk_X509_num(chain) : 0;
}

/// The peer's certificate number `index` (borrowed, not to be freed).
static inline X509 *tether_ssl_peer_chain_certificate(const SSL *ssl, int index) {
    return sk_X509_value(SSL_get_peer_cert_chain(ssl), index);
}

/// SHA-256 of the certificate's DER SubjectPublicKeyInfo into out[32]. Returns 1 on success.
static inline int tether_x509_public_key_sha256(X509 *certificate, unsigned char *out) {
    unsigned char *der = NULL;
    int length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(certificate), &der);
    if (length <= 0) return 0;
    unsigned int written = 0;
    int ok = EVP_Digest(der, (size_t)length, out, &written, EVP_sha256(), NULL);
    OPENSSL_free(der);
    return ok == 1 && written == 32;
}

/// The certificate's DER length (then `tether_x509_der` writes it into a buffer that size).
static inline int tether_x509_der_length(X509 *certificate) {
    return i2d_X509(certificate, NULL);
}

/// Writes the certificate's DER into out (tether_x509_der_length bytes). Returns the length.
static inline int tether_x509_der(X509 *certificate, unsigned char *out) {
    unsigned char *cursor = out;
    return i2d_X509(certificate, &cursor);
}

#endif
