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

namespace mstar::actors::internal {

/// Turns the refusal log on for every SSL_CTX made from now on (idempotent,
/// thread-safe). Returns false when libssl's SSL_CTX_set_verify cannot be
/// found, so the caller can report that refusals will not be logged.
[[nodiscard]] bool enable_tls_refusal_log();

/// Whether the executable's SSL_CTX_set_verify is the one libcaf_openssl
/// calls (it is not when the binary is linked without exporting it).
[[nodiscard]] bool tls_refusal_log_is_bound();

}  // namespace mstar::actors::internal
