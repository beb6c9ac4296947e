#pragma once

// Owners for the libcrypto handles the control plane's certificate code uses,
// and the one place that turns OpenSSL's error queue into text.

#include <memory>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string>

namespace mstar::actors::internal {

template <auto Free>
struct openssl_deleter {
  template <class T>
  void operator()(T* p) const noexcept {
    Free(p);
  }
};

using pkey_ptr = std::unique_ptr<EVP_PKEY, openssl_deleter<EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, openssl_deleter<X509_free>>;
using x509_ext_ptr = std::unique_ptr<X509_EXTENSION, openssl_deleter<X509_EXTENSION_free>>;
using x509_store_ptr = std::unique_ptr<X509_STORE, openssl_deleter<X509_STORE_free>>;
using x509_store_ctx_ptr = std::unique_ptr<X509_STORE_CTX, openssl_deleter<X509_STORE_CTX_free>>;
using bignum_ptr = std::unique_ptr<BIGNUM, openssl_deleter<BN_free>>;

/// The texts of OpenSSL's error queue for this thread, oldest first, joined
/// by "; " (the queue is emptied): "unknown" when it was empty.
[[nodiscard]] std::string openssl_errors();

}  // namespace mstar::actors::internal
