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

/// RFC 9266 tls-exporter: 32 bytes exported with the label "EXPORTER-Channel-Binding" and no
/// context into out[32]. Returns 1 on success.
static inline int tether_ssl_export_channel_binding(SSL *ssl, unsigned char *out) {
    static const char label[] = "EXPORTER-Channel-Binding";
    return SSL_export_keying_material(ssl, out, 32, label, sizeof label - 1, NULL, 0, 0);
}

/// RFC 5929 tls-unique: the first Finished message of the latest handshake (the client's in a
/// full handshake, the server's in a resumed one) into out (up to 64 bytes). Returns its length,
/// 0 when there is none.
static inline int tether_ssl_tls_unique(const SSL *ssl, unsigned char *out) {
    size_t length = SSL_session_reused((SSL *)ssl) ? SSL_get_peer_finished(ssl, out, 64) : SSL_get_finished(ssl, out, 64);
    return length > 64 ? 0 : (int)length;
}

/// RFC 5929 tls-server-end-point: the hash of the server's certificate (DER) with the hash of
/// its signature algorithm, SHA-256 for MD5 and SHA-1, into out (up to EVP_MAX_MD_SIZE bytes).
/// Returns its length, 0 when the peer sent no certificate or its signature algorithm names no
/// single hash (Ed25519: RFC 5929 does not define the binding then).
static inline int tether_ssl_server_end_point(const SSL *ssl, unsigned char *out) {
    X509 *certificate = SSL_get1_peer_certificate(ssl);
    if (certificate == NULL) return 0;
    int digest_nid = NID_undef, key_nid = NID_undef;
    int length = 0;
    if (OBJ_find_sigid_algs(X509_get_signature_nid(certificate), &digest_nid, &key_nid) == 1 && digest_nid != NID_undef) {
        if (digest_nid == NID_md5 || digest_nid == NID_sha1) digest_nid = NID_sha256;
        const EVP_MD *digest = EVP_get_digestbynid(digest_nid);
        unsigned int written = 0;
        if (digest != NULL && X509_digest(certificate, digest, out, &written) == 1) length = (int)written;
    }
    X509_free(certificate);
    return length;
}

#endif
