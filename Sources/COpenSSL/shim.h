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

#endif
