#pragma once

// Clears OpenSSL's error queue before every TLS I/O call CAF's OpenSSL
// module makes. CAF 0.17.6 (libcaf_openssl session.cpp) calls SSL_read,
// SSL_write, SSL_connect and SSL_accept and classifies a non-positive result
// with SSL_get_error, but never empties the thread's error queue (its error
// branch leaves the queue as it is). OpenSSL requires the queue to be empty
// before each I/O call, or SSL_get_error reports SSL_ERROR_SSL for whatever
// an earlier call left there. All connections share the middleman's thread,
// so one connection's failure (a killed peer: OpenSSL 3 queues "unexpected
// eof while reading"; a refused handshake) made the next SSL_read on a
// healthy connection, which only had no data yet (SSL_ERROR_WANT_READ),
// look failed: CAF closed it, and the router took that node for dead (a
// "dropped link", then "joined again"). This file defines the four calls in
// the executable (as tls_refusal_log.cpp does for SSL_CTX_set_verify): each
// clears the queue, then forwards to libssl's.

namespace mstar::actors::internal {

/// Whether the executable's SSL_read (and the three others) are the ones
/// libcaf_openssl calls, and libssl's were found to forward to.
[[nodiscard]] bool ssl_error_queue_guard_is_bound();

}  // namespace mstar::actors::internal
