#pragma once

// The socket plumbing of the socket group (socket_group.hpp): addresses in
// their text form, one owner per descriptor, and reads and writes that never
// block past a deadline. Every socket here is non-blocking; waits are poll()
// with the time left, so a call returns at its deadline whatever the peer
// does. Writes use MSG_NOSIGNAL: a peer that left is an outcome, not SIGPIPE.

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <sys/socket.h>

#include "core/result.hpp"

namespace mstar::parallel::internal {

using deadline = std::chrono::steady_clock::time_point;

/// Milliseconds left before `d`, at least 0, for poll().
[[nodiscard]] int millis_left(deadline d) noexcept;

/// Owns one file descriptor and closes it when destroyed.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(unique_fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  unique_fd& operator=(unique_fd&& o) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  [[nodiscard]] int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// Where a group meets, parsed from `unix:PATH` or `tcp:HOST:PORT` (HOST an
/// IPv4 address, `[IPv6]`, or `localhost`; no name lookup, so parsing never
/// blocks). `text` is the canonical form, what errors name.
struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  bool is_path = false;  ///< a Unix-domain socket
  unsigned port = 0;     ///< TCP only
  std::string text;
};

/// The address `text` names: invalid_argument naming `field` otherwise.
[[nodiscard]] result<socket_address> parse_address(std::string_view text, std::string_view field);

/// A socket listening at an address; `address` is what it is bound to (the
/// port the kernel chose for port 0). Removes its Unix socket's path when
/// destroyed.
struct listening_socket {
  listening_socket() = default;
  listening_socket(listening_socket&&) noexcept = default;
  listening_socket& operator=(listening_socket&& o) noexcept;
  ~listening_socket() { close(); }

  /// Stops listening and removes a Unix socket's path.
  void close() noexcept;

  unique_fd fd;
  socket_address address;
};

/// Binds and listens at `where`. io_error naming the address and errno's
/// text (a Unix path that already exists is not replaced: EADDRINUSE).
[[nodiscard]] result<listening_socket> listen_at(const socket_address& where);

/// Connects to `where`, trying again while nobody listens there yet (refused,
/// path missing) until `until`. internal when the deadline passes, io_error
/// for other failures; both name the address.
[[nodiscard]] result<unique_fd> connect_to(const socket_address& where, deadline until);

/// A connection waiting at `listener`, non-blocking, or an empty unique_fd
/// when none is waiting.
[[nodiscard]] unique_fd accept_one(const listening_socket& listener);

/// What a read or write came to.
enum class io_status {
  done,         ///< all the bytes moved (for read_some: what was there)
  closed,       ///< the peer closed or reset the connection; `why` says which
  timed_out,    ///< the deadline passed first
  interrupted,  ///< write_all only: the peer sent something before we finished
};

struct io_outcome {
  io_status status = io_status::done;
  std::size_t bytes = 0;  ///< bytes moved
  std::string why;        ///< for closed: "its connection closed", or errno's text
};

/// Writes all of `data` by `until`. With `stop_when_readable`, stops as soon
/// as the peer has sent something (a rank told to stop mid-send reads why).
[[nodiscard]] io_outcome write_all(int fd, std::span<const std::byte> data, deadline until,
                                   bool stop_when_readable = false);

/// Reads exactly `data.size()` bytes by `until`.
[[nodiscard]] io_outcome read_all(int fd, std::span<std::byte> data, deadline until);

/// Reads what is there now, without waiting (bytes may be 0).
[[nodiscard]] io_outcome read_some(int fd, std::span<std::byte> data);

}  // namespace mstar::parallel::internal
