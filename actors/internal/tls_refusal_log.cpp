#include "actors/internal/tls_refusal_log.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <string>
#include <sys/socket.h>
#include <utility>

namespace mstar::actors::internal {

namespace {

using set_verify_fn = void (*)(SSL_CTX*, int, SSL_verify_cb);

std::atomic<bool> enabled{false};

set_verify_fn libssl_set_verify() {
  static const auto fn = [] {
    void* sym = dlvsym(RTLD_NEXT, "SSL_CTX_set_verify", "OPENSSL_3.0.0");
    if (sym == nullptr)
      sym = dlsym(RTLD_NEXT, "SSL_CTX_set_verify");
    return reinterpret_cast<set_verify_fn>(sym);
  }();
  return fn;
}

std::string peer_address(const SSL* ssl) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int fd = SSL_get_fd(ssl);
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return "unknown peer";
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
}

std::string subject_of(X509* cert) {
  if (cert == nullptr)
    return "none";
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

// Why the last certificate failed on this thread: the verify callback runs
// inside the same SSL_accept/SSL_connect call that then sends the alert.
thread_local std::string last_verify_failure;

int observe_verify(int ok, X509_STORE_CTX* store) {
  if (!ok)
    last_verify_failure =
        fmt::format("certificate '{}': {}", subject_of(X509_STORE_CTX_get_current_cert(store)),
                    X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)));
  return ok;
}

void observe_handshake(const SSL* ssl, int where, int value) {
  const char* role = SSL_is_server(ssl) ? "accepting" : "connecting";
  if ((where & SSL_CB_ALERT) != 0 && SSL_is_init_finished(ssl) == 0) {
    const bool sent = (where & SSL_CB_WRITE) != 0;
    std::string why = std::exchange(last_verify_failure, {});
    spdlog::warn(
        "control plane: refused TLS peer {} ({}): {} alert '{}'{}{}; no actor message "
        "accepted",
        peer_address(ssl), role, sent ? "sent" : "received", SSL_alert_desc_string_long(value),
        why.empty() ? "" : ", ", why);
  } else if ((where & SSL_CB_HANDSHAKE_DONE) != 0) {
    X509* cert = SSL_get0_peer_certificate(ssl);
    spdlog::debug("control plane: authenticated TLS peer {} ({}) as '{}'", peer_address(ssl), role,
                  subject_of(cert));
  }
}

}  // namespace

bool enable_tls_refusal_log() {
  if (libssl_set_verify() == nullptr)
    return false;
  enabled.store(true);
  return true;
}

bool tls_refusal_log_is_bound() {
  return dlsym(RTLD_DEFAULT, "SSL_CTX_set_verify") == reinterpret_cast<void*>(&SSL_CTX_set_verify);
}

}  // namespace mstar::actors::internal

// The interposer (see the header). Only CAF's authenticated-context call,
// a peer certificate required and no callback of its own, gets the
// observers; every other caller reaches libssl unchanged.
extern "C" __attribute__((visibility("default"))) void SSL_CTX_set_verify(SSL_CTX* ctx, int mode,
                                                                          SSL_verify_cb callback) {
  using namespace mstar::actors::internal;
  auto forward = libssl_set_verify();
  if (forward == nullptr) {
    // Fail closed: a context left without verification would accept anyone.
    std::fputs("mstar: libssl's SSL_CTX_set_verify not found; aborting\n", stderr);
    std::abort();
  }
  constexpr int caf_mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (enabled.load() && mode == caf_mode && callback == nullptr) {
    forward(ctx, mode, observe_verify);
    SSL_CTX_set_info_callback(ctx, observe_handshake);
    return;
  }
  forward(ctx, mode, callback);
}
