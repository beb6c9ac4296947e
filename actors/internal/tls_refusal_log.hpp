#pragma once

// Logs the TLS handshakes CAF's OpenSSL module refuses. CAF 0.17.6 gives no
// hook: it makes a fresh SSL_CTX per connection and calls
// SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
// nullptr) on it, and its own log lines are compiled out in Debian's build
// (CAF_LOG_LEVEL_QUIET). This file defines SSL_CTX_set_verify in the
// executable, which the dynamic linker binds libcaf_openssl's call to; it
// forwards to libssl's and, for that exact call, adds an info callback and a
// verify callback that only observe: the verification result is unchanged.
// A handshake that sends or receives an alert before it finished is logged
// then (with the verify error, if any); one that ends without an alert
// (garbage, a peer that hangs up) when its SSL object is freed.
//
// The same file defines SSL_read and SSL_write, which empty the thread's
// OpenSSL error queue before forwarding for CAF's authenticated connections:
// CAF 0.17.6 does not, so the errors of a refused handshake made the next
// read of another, authenticated link look failed and CAF closed that link
// (see tls_refusal_log.cpp).

struct ssl_st;

namespace mstar::actors::internal {

/// Turns the refusal log on for every SSL_CTX made from now on (idempotent,
/// thread-safe). Returns false when libssl's SSL_CTX_set_verify cannot be
/// found, so the caller can report that refusals will not be logged.
[[nodiscard]] bool enable_tls_refusal_log();

/// Whether the executable's SSL_CTX_set_verify, SSL_read and SSL_write are
/// the ones libcaf_openssl calls (they are not when the binary is linked
/// without exporting them).
[[nodiscard]] bool tls_refusal_log_is_bound();

/// Whether ssl was made from a context CAF's authenticated mode set up while
/// the refusal log was on (the connections the SSL_read/SSL_write
/// interposers clear the error queue for).
[[nodiscard]] bool is_caf_authenticated(const ssl_st* ssl);

}  // namespace mstar::actors::internal
