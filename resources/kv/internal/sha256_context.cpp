#include "resources/kv/internal/sha256_context.hpp"

#include <cstdio>
#include <cstdlib>
#include <openssl/evp.h>

namespace mstar::resources::internal {
namespace {

[[noreturn]] void die(const char* what) {
  // OpenSSL failing to hash in memory means the library itself is broken;
  // there is no input a caller could fix.
  std::fprintf(stderr, "mstar: OpenSSL SHA-256 failed in %s\n", what);
  std::abort();
}

const EVP_MD* sha256_method() {
  static EVP_MD* md = [] {
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (m == nullptr)
      die("EVP_MD_fetch");
    return m;
  }();
  return md;
}

}  // namespace

preimage_writer::preimage_writer() : buf_(1024), ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr)
    die("EVP_MD_CTX_new");
}

preimage_writer::~preimage_writer() {
  EVP_MD_CTX_free(ctx_);
}

digest256 preimage_writer::digest() {
  digest256 out;
  unsigned int len = 0;
  if (EVP_DigestInit_ex2(ctx_, sha256_method(), nullptr) != 1)
    die("EVP_DigestInit_ex2");
  if (EVP_DigestUpdate(ctx_, buf_.data(), at_) != 1)
    die("EVP_DigestUpdate");
  if (EVP_DigestFinal_ex(ctx_, out.data(), &len) != 1 || len != out.size()) {
    die("EVP_DigestFinal_ex");
  }
  return out;
}

preimage_writer& thread_preimage() {
  thread_local preimage_writer writer;
  return writer;
}

}  // namespace mstar::resources::internal
