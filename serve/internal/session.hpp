#pragma once

// One client connection: reads requests (keep-alive), answers plain ones,
// runs generations through the runtime and writes their Server-Sent Events
// or final body. Every member runs on the connection's strand; engine
// callbacks post their deltas onto it.

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serve/http_server.hpp"

namespace mstar::serve::internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

class session;

/// What the listener and its sessions share.
struct server_state {
  std::shared_ptr<service> svc;
  server_options options;
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::map<session*, std::weak_ptr<session>> sessions;
  /// Sessions from construction to the end of their destruction (see
  /// session::counted): what `stop` waits on before it stops the I/O threads
  /// and the io_context that every session's socket belongs to.
  std::atomic<std::size_t> sessions_alive{0};

  [[nodiscard]] std::vector<std::shared_ptr<session>> live_sessions();
};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket&& socket, std::shared_ptr<server_state> state);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Registers with the server and reads the first request.
  void start();
  /// Server stopping: close now when idle (else after the response).
  void close_when_idle();
  /// Server stopping past its grace: cancel the running generation.
  void cancel_generation();

 private:
  void read();
  void on_header(beast::error_code ec);
  void on_body(beast::error_code ec);
  void refuse_large_body();
  void handle();
  void send(http_reply reply);
  void start_generation(std::unique_ptr<generation> g);
  void on_delta(const engine::delta& d);
  void end_generation();
  void log_generation() const;
  void write_raw(std::string data);
  void write_chunk(const std::string& data);
  void write_next();
  void watch_peer();
  void on_watch(beast::error_code ec);
  void peer_gone();
  void after_response();
  void close();

  /// Counts the session in server_state::sessions_alive until the very end
  /// of its destruction: declared first, so destroyed after `stream_`. A
  /// session's last reference can go on another thread (the engine's delta
  /// callback, when the router drops a finished request), and there its
  /// weak pointer in `sessions` expires before its destructor closes the
  /// socket: stop() took such a session for gone and destroyed the
  /// io_context under the socket (AddressSanitizer in CI,
  /// launcher.pd_processes.pd-images).
  struct counted {
    explicit counted(std::shared_ptr<server_state> s) : state(std::move(s)) {
      ++state->sessions_alive;
    }
    ~counted() { --state->sessions_alive; }
    counted(const counted&) = delete;
    counted& operator=(const counted&) = delete;
    std::shared_ptr<server_state> state;
  };

  counted counted_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<server_state> state_;
  http::response<http::string_body> res_;
  std::unique_ptr<generation> gen_;
  std::vector<std::string> engine_ids_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  std::size_t in_flight_ = 0;   ///< outbox pieces under the current write
  bool ending_stream_ = false;  ///< the last chunk is queued: reply done once written
  bool keep_alive_ = false;
  bool watching_ = false;
  bool read_after_watch_ = false;
  bool peer_closed_ = false;
  bool closed_ = false;
  bool busy_ = false;  ///< between reading a request and finishing its response
};

}  // namespace mstar::serve::internal
