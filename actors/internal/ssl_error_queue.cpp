#include "actors/internal/ssl_error_queue.hpp"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace mstar::actors::internal {
namespace {

void* libssl(const char* name) {
  void* sym = dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
  return sym != nullptr ? sym : dlsym(RTLD_NEXT, name);
}

template <class Fn>
Fn next(const char* name) {
  auto* fn = reinterpret_cast<Fn>(libssl(name));
  if (fn == nullptr) {
    std::fprintf(stderr, "mstar: libssl's %s not found; aborting\n", name);
    std::abort();
  }
  return fn;
}

using io_fn = int (*)(SSL*, void*, int);
using write_fn = int (*)(SSL*, const void*, int);
using handshake_fn = int (*)(SSL*);

}  // namespace

bool ssl_error_queue_guard_is_bound() {
  return libssl("SSL_read") != nullptr && libssl("SSL_write") != nullptr &&
         libssl("SSL_connect") != nullptr && libssl("SSL_accept") != nullptr &&
         dlsym(RTLD_DEFAULT, "SSL_read") == reinterpret_cast<void*>(&SSL_read) &&
         dlsym(RTLD_DEFAULT, "SSL_write") == reinterpret_cast<void*>(&SSL_write) &&
         dlsym(RTLD_DEFAULT, "SSL_connect") == reinterpret_cast<void*>(&SSL_connect) &&
         dlsym(RTLD_DEFAULT, "SSL_accept") == reinterpret_cast<void*>(&SSL_accept);
}

}  // namespace mstar::actors::internal

// The interposers (see the header): an empty queue, then libssl's call.
extern "C" __attribute__((visibility("default"))) int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto forward =
      mstar::actors::internal::next<mstar::actors::internal::io_fn>("SSL_read");
  ERR_clear_error();
  return forward(ssl, buf, num);
}

extern "C" __attribute__((visibility("default"))) int SSL_write(SSL* ssl, const void* buf,
                                                                int num) {
  static const auto forward =
      mstar::actors::internal::next<mstar::actors::internal::write_fn>("SSL_write");
  ERR_clear_error();
  return forward(ssl, buf, num);
}

extern "C" __attribute__((visibility("default"))) int SSL_connect(SSL* ssl) {
  static const auto forward =
      mstar::actors::internal::next<mstar::actors::internal::handshake_fn>("SSL_connect");
  ERR_clear_error();
  return forward(ssl);
}

extern "C" __attribute__((visibility("default"))) int SSL_accept(SSL* ssl) {
  static const auto forward =
      mstar::actors::internal::next<mstar::actors::internal::handshake_fn>("SSL_accept");
  ERR_clear_error();
  return forward(ssl);
}
