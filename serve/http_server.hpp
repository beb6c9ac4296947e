#pragma once

// mstar-serve's HTTP/1.1 server: Boost.Beast over Boost.Asio (header-only,
// in Debian's libboost-dev), a few I/O threads beside the engine's actor
// system. Keep-alive, Server-Sent Events in chunked responses, a body limit
// (413), an idle timeout, a client that goes away cancels its requests, and
// a graceful stop: stop accepting, let in-flight requests finish within a
// deadline, cancel the rest, return.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.hpp"
#include "serve/service.hpp"

namespace mstar::serve {

struct server_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;  ///< 0: any free port (see `port()`)
  std::size_t threads = 0;    ///< I/O threads (0: a quarter of the cores, 2 to 8)
  std::size_t max_body_bytes = 8U << 20U;
  std::chrono::seconds idle_timeout{60};
  std::chrono::seconds shutdown_grace{10};  ///< in-flight requests get this long
  bool log_requests = true;                 ///< one line per generation on stderr
};

class http_server {
 public:
  /// Binds and starts serving on `options.threads` threads.
  [[nodiscard]] static result<std::unique_ptr<http_server>> start(std::shared_ptr<service> svc,
                                                                  const server_options& options);
  ~http_server();  ///< stops (gracefully) if still running
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The bound port.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// Blocks until SIGINT or SIGTERM, then stops gracefully.
  void run_until_signal();
  /// Stops gracefully (idempotent): no new connections, /health says 503,
  /// in-flight requests get `shutdown_grace`, then are cancelled; returns
  /// once every connection closed and the I/O threads joined.
  void stop();

 private:
  struct impl;
  explicit http_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace mstar::serve
