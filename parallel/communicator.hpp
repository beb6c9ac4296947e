#pragma once

// The collectives a tensor-parallel model needs between its ranks, and
// nothing about how the bytes move: models/ calls this interface; an
// in-process group over threads (local_group.hpp) implements it for tests and
// CPU runs over host memory, a socket group (socket_group.hpp) for ranks in
// separate processes over host memory, and a NCCL group, one rank per GPU
// (nccl_group.hpp), over device memory.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/result.hpp"

namespace mstar::parallel {

/// One rank's end of a group of `size()` ranks.
///
/// Spans are the memory the implementation works on: host memory for the
/// in-process group, device memory of the rank's GPU for the NCCL group.
///
/// Every rank must call the same collectives in the same order with the same
/// counts (the step protocol runs identically on every rank); the in-process
/// and socket groups report a mismatch as an error, NCCL cannot see one (it ends in the
/// timeout at best). Every call is bounded by the group's timeout: a peer
/// that never arrives, or that left the group (its communicator destroyed, or
/// `abort` called), fails the call with errc::internal naming the operation
/// and, where the implementation can tell, the missing rank. After one
/// failure the group is broken and every later call on this rank fails with
/// the same cause; peers fail too (the in-process group with the same cause,
/// NCCL's with their own error or timeout). Not thread-safe: one thread
/// drives one rank.
class communicator {
 public:
  virtual ~communicator() = default;

  /// This rank, in [0, size()).
  [[nodiscard]] virtual int rank() const noexcept = 0;
  /// Ranks in the group.
  [[nodiscard]] virtual int size() const noexcept = 0;
  /// How long a collective waits for its peers before it fails.
  [[nodiscard]] virtual std::chrono::milliseconds timeout() const noexcept = 0;
  /// Where the spans of the collectives live: host memory (false: the
  /// in-process group) or this rank's GPU memory (true: a NCCL group). A
  /// CUDA model passes device buffers to a device group and stages them
  /// through pinned host memory for a host group.
  [[nodiscard]] virtual bool takes_device_memory() const noexcept { return false; }

  /// `data` becomes the element-wise sum over ranks, the same bits on every
  /// rank. The order of the sum is the implementation's: rank order in the
  /// in-process group, NCCL's ring or tree order in the NCCL group, so the
  /// two may differ in the last bits.
  [[nodiscard]] virtual result<void> all_reduce_sum(std::span<float> data) = 0;

  /// `out` (size() * `in`.size() elements) becomes every rank's `in`, rank
  /// after rank. Counts are equal across ranks, as NCCL requires.
  [[nodiscard]] virtual result<void> all_gather(std::span<const float> in,
                                                std::span<float> out) = 0;

  /// Every rank's `data` becomes rank `root`'s bytes.
  [[nodiscard]] virtual result<void> broadcast(std::span<std::byte> data, int root) = 0;

  /// Breaks the group: this rank's later collectives fail naming this rank
  /// and `reason`, and so do its peers' current and later ones in the
  /// in-process group (NCCL's peers fail with a NCCL error, or on NVLink when
  /// their timeout passes). For a rank that stops on an error of its own, so
  /// its peers do not wait on it for ever.
  virtual void abort(const std::string& reason) = 0;
};

/// Joins rank `rank` of a group being formed and returns its communicator.
/// Called on the rank's own thread, every rank at once (NCCL's ranks meet
/// while they join), each call at most the group's timeout.
using rank_joiner = std::function<result<std::shared_ptr<communicator>>(int rank)>;

/// Forms a group of `ranks` ranks, rank r on `devices[r]` ("cpu", "cuda:N"),
/// collectives bounded by `timeout`: the joiner of its ranks, or nullopt
/// when this kind of group does not serve those devices (the caller then
/// forms an in-process group, local_group.hpp). A tensor_parallel_lm takes
/// one through models::run_options::tensor_parallel_groups; the NCCL group
/// gives one (nccl_group.hpp), so models/ names no NCCL.
using group_maker = std::function<result<std::optional<rank_joiner>>(
    int ranks, std::span<const std::string> devices, std::chrono::milliseconds timeout)>;

/// How ranks in separate processes form a group: rank 0 hosts it (`host`
/// gives the text the other ranks join with, and what completes rank 0's
/// membership once they have), every other rank joins with that text
/// (`join`). A conductor passes the text to its followers
/// (actors/rank_processes.hpp); socket_group.hpp and nccl_group.hpp make one.
struct process_group_factory {
  using communicator_ptr = std::shared_ptr<communicator>;
  struct hosted {
    std::string join_text;
    std::function<result<communicator_ptr>()> complete;
  };
  /// Rank 0's side of a group of `ranks`, begun.
  std::function<result<hosted>(int ranks)> host;
  /// Rank `rank` (>= 1) of `ranks` joins with rank 0's text.
  std::function<result<communicator_ptr>(const std::string& join_text, int rank, int ranks)> join;
};

/// The error a collective returns when rank `peer` did not arrive at `op`
/// within `timeout` (seen from `rank`): errc::internal naming all three.
[[nodiscard]] error peer_timeout(std::string_view op, int rank, int peer,
                                 std::chrono::milliseconds timeout);

/// The error a collective returns when rank `peer` left the group.
[[nodiscard]] error peer_gone(std::string_view op, int rank, int peer, std::string_view reason);

}  // namespace mstar::parallel
