#pragma once

// The socket group: ranks in separate processes (one per GPU, started by a
// launcher) or on threads of one (tests) meeting over stream sockets, TCP or
// Unix-domain. What lets tensor-parallel ranks in different processes meet
// on the CPU, so the multi-process path runs and is tested without GPUs; the
// collectives work on host memory, like the in-process group's.

#include <chrono>
#include <memory>
#include <string>

#include "core/result.hpp"
#include "parallel/communicator.hpp"

namespace mstar::parallel {

/// How one rank joins a socket group.
struct socket_group_options {
  /// Where rank 0 listens: `tcp:HOST:PORT` (HOST an IPv4 address, `[IPv6]`
  /// or `localhost`; names are not looked up) or `unix:PATH` (a path that
  /// does not exist yet; rank 0 creates it and removes it once the group has
  /// formed). Rank 0 may ask for port 0 and learn the port from
  /// socket_group_listener::address().
  std::string address;
  int rank = 0;
  int size = 1;
  /// A secret every rank was given (the launcher makes a random one): rank 0
  /// refuses a joiner whose token differs, so strangers cannot join.
  std::string token;
  /// How long forming the group, and each collective, waits for peers.
  std::chrono::milliseconds timeout{60'000};
};

/// Rank 0 of a socket group, listening while the other ranks start: a
/// launcher calls socket_group::listen, passes address() to the processes of
/// ranks 1..size-1, then calls accept_all(). Move-only; destroying it before
/// accept_all closes the socket (joiners are refused by the kernel).
class socket_group_listener {
 public:
  socket_group_listener(socket_group_listener&&) noexcept;
  socket_group_listener& operator=(socket_group_listener&&) noexcept;
  ~socket_group_listener();

  /// The address bound, in the options' form, with the port the kernel
  /// chose when the options asked for port 0. Stays valid after
  /// accept_all; read it before handing accept_all to another thread.
  [[nodiscard]] const std::string& address() const noexcept;

  /// Waits, at most the options' timeout, until ranks 1..size-1 have each
  /// joined with the right group size and token, then tells them the group
  /// has formed and returns rank 0's communicator. Meanwhile a joiner with a
  /// wrong token, group size, rank or protocol, or a rank that already
  /// joined, is refused with a reason and its connection closed; the real
  /// ranks may still join. At the deadline: errc::internal naming the first
  /// missing rank (and the last refusal, if any), and the ranks that did
  /// join are refused with that reason. Once only: a second call fails.
  [[nodiscard]] result<std::unique_ptr<communicator>> accept_all();

 private:
  friend class socket_group;
  struct state;
  explicit socket_group_listener(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// Makes the ranks of a socket group.
///
/// Star topology: every collective goes through rank 0, which checks that
/// every rank made the same call (op, count, root, sequence number), sums in
/// rank order (0 + rank 0 + rank 1 + ..., the bits of the in-process
/// group's sum on the same data), and sends each rank the result. A mismatch
/// breaks the group with an error naming both calls, on every rank.
///
/// Failures, on every rank: a peer whose connection closes (its process
/// died, its communicator was destroyed) fails the call at once with
/// peer_gone naming it; `abort(reason)` tells the peers (rank 0 relays it)
/// and they fail naming the aborting rank and the reason; a peer that does
/// not arrive within the timeout fails the others with peer_timeout naming
/// it. Rank 0 judges and tells the others, so every rank names the same
/// cause: a rank other than 0 waits past the timeout a little longer for
/// rank 0's verdict (min(timeout, 1 s)) before blaming rank 0 itself. After
/// one failure the group is broken and later calls fail with the same cause;
/// a failed call may leave its output buffers half written.
///
/// Thread-confined like every communicator; ranks on different threads of
/// one process share nothing but their sockets.
class socket_group {
 public:
  static constexpr std::chrono::milliseconds default_timeout{60'000};

  /// Rank 0 binds and listens (options.rank must be 0). invalid_argument
  /// naming the field for bad options; io_error naming the address when it
  /// cannot be bound (in use, a path that exists, no permission).
  [[nodiscard]] static result<socket_group_listener> listen(const socket_group_options& options);

  /// Joins the group as options.rank. Rank 0 listens and accepts (listen,
  /// then accept_all); another rank connects to rank 0, retrying while it is
  /// not listening yet, introduces itself and waits until the group has
  /// formed, all within the timeout. invalid_argument naming the field for
  /// bad options (size < 1, rank outside [0, size), an unparsable address,
  /// port 0 for a joiner, a timeout that is not positive, a token over 1024
  /// bytes), or with rank 0's reason when it refused this rank; internal
  /// when no group formed in time.
  [[nodiscard]] static result<std::unique_ptr<communicator>> join(
      const socket_group_options& options);
};

/// Socket groups for ranks in separate processes: rank 0 listens at
/// `address` (`tcp:HOST:0` for any port, `unix:PATH`), every rank brings
/// `token`, forming and each collective bounded by `timeout`.
[[nodiscard]] process_group_factory socket_process_groups(std::string address, std::string token,
                                                          std::chrono::milliseconds timeout);

}  // namespace mstar::parallel
