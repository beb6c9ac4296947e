#pragma once

// Owners for the libcrypto handles the control plane's certificate code uses,
// and the one place that turns OpenSSL's error queue into text.

#include <memory>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
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
/// For secret numbers: zeroed before they are freed.
using secret_bignum_ptr = std::unique_ptr<BIGNUM, openssl_deleter<BN_clear_free>>;
using bn_ctx_ptr = std::unique_ptr<BN_CTX, openssl_deleter<BN_CTX_free>>;
using ec_group_ptr = std::unique_ptr<EC_GROUP, openssl_deleter<EC_GROUP_free>>;
using ec_point_ptr = std::unique_ptr<EC_POINT, openssl_deleter<EC_POINT_free>>;
using kdf_ptr = std::unique_ptr<EVP_KDF, openssl_deleter<EVP_KDF_free>>;
using kdf_ctx_ptr = std::unique_ptr<EVP_KDF_CTX, openssl_deleter<EVP_KDF_CTX_free>>;
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, openssl_deleter<EVP_PKEY_CTX_free>>;
using param_bld_ptr = std::unique_ptr<OSSL_PARAM_BLD, openssl_deleter<OSSL_PARAM_BLD_free>>;
/// OSSL_PARAM_free clears the secure block a builder put private numbers in.
using params_ptr = std::unique_ptr<OSSL_PARAM, openssl_deleter<OSSL_PARAM_free>>;

/// The texts of OpenSSL's error queue for this thread, oldest first, joined
/// by "; " (the queue is emptied): "unknown" when it was empty.
[[nodiscard]] std::string openssl_errors();

}  // namespace mstar::actors::internal
