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
#include <string_view>
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

// One connection's handshake, kept in the SSL object's ex_data from the
// handshake's start (the socket is still connected, so the address is
// known) until SSL_free, which is where a connection that never finished
// its handshake and sent or got no alert is logged.
struct handshake_record {
  std::string peer;
  const char* role;
  bool finished = false;
  bool logged = false;
};

void refused(handshake_record& record, std::string_view why) {
  record.logged = true;
  spdlog::warn("control plane: refused TLS peer {} ({}): {}; no actor message accepted",
               record.peer, record.role, why);
}

void free_record(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  auto* record = static_cast<handshake_record*>(ptr);
  if (record != nullptr && !record->finished && !record->logged)
    refused(*record, "connection closed before the TLS handshake completed");
  delete record;
}

int record_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, free_record);
  return index;
}

// OpenSSL 3.0 has no text for TLS 1.3's certificate_required (116).
std::string alert_text(int value) {
  const int code = value & 0xff;
  std::string_view text = code == 116 ? "certificate required" : SSL_alert_desc_string_long(value);
  return fmt::format("'{}' ({})", text, code);
}

void observe_handshake(const SSL* ssl, int where, int value) {
  auto* record = static_cast<handshake_record*>(SSL_get_ex_data(ssl, record_index()));
  if ((where & SSL_CB_HANDSHAKE_START) != 0 && record == nullptr) {
    record =
        new handshake_record{peer_address(ssl), SSL_is_server(ssl) ? "accepting" : "connecting"};
    if (SSL_set_ex_data(const_cast<SSL*>(ssl), record_index(), record) != 1) {
      delete record;
      record = nullptr;
    }
  }
  if (record == nullptr)
    return;
  if ((where & SSL_CB_HANDSHAKE_DONE) != 0 && !record->finished) {
    record->finished = true;
    spdlog::debug("control plane: authenticated TLS peer {} ({}) as '{}'", record->peer,
                  record->role, subject_of(SSL_get0_peer_certificate(ssl)));
  } else if ((where & SSL_CB_ALERT) != 0 && !record->finished && !record->logged) {
    std::string why = std::exchange(last_verify_failure, {});
    refused(*record,
            fmt::format("{} alert {}{}{}", (where & SSL_CB_WRITE) != 0 ? "sent" : "received",
                        alert_text(value), why.empty() ? "" : ", ", why));
  }
}

}  // namespace

bool enable_tls_refusal_log() {
  if (libssl_set_verify() == nullptr || record_index() < 0)
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
