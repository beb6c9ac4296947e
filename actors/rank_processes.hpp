#pragma once

// Tensor-parallel ranks in separate processes, one scheduler for all: the
// conductor's process runs rank 0 and everything a node runs (engine or
// actors, pools, HTTP); each other rank is a follower process that holds
// only its shard of the model and its copy of the pools' memory, and does
// exactly what the conductor's stream tells it (actors/rank_wire.hpp): the
// conductor broadcasts the step; no rank decides alone.
//
// On the conductor, `rank_conductor::accept_all` gives one `causal_lm` that
// the engine and the actors drive like any model. Each call it takes goes to
// every follower's stream first, then to rank 0's model; the forward's
// collectives meet on the ranks' data group (a socket group on the CPU,
// NCCL on GPUs; `rank_group_factory`). Its `pools()` is rank 0's spec with
// the memory replicated over every rank (kernels/replicated_arena.hpp):
// member 0 is this process's, member r a `remote_arena` that puts every
// byte movement on rank r's stream, in order with the model calls, so the
// follower's copy goes through the same copies and zeroing as rank 0's.
//
// Failure: a follower whose call fails aborts its data group (so rank 0's
// collective fails at once, naming it), tells the conductor why and leaves;
// a follower process that dies closes its stream and its group sockets.
// Either way the conductor's model fails that call and every later one with
// "tensor-parallel rank r: ...", so the engine fails its requests rather
// than hanging. The conductor leaving (destroyed, or its process dead)
// ends every follower's loop.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "parallel/communicator.hpp"

namespace mstar::actors {

/// How the ranks' data group (the forward's collectives) is formed:
/// parallel::socket_process_groups (host memory) or
/// parallel::nccl_process_groups (GPUs).
using rank_group_factory = parallel::process_group_factory;

/// Loads one rank of the model with `run.tensor_parallel` its communicator.
using rank_loader =
    std::function<result<std::unique_ptr<models::causal_lm>>(const models::run_options& run)>;

struct rank_process_options {
  /// The conductor's stream address: `tcp:HOST:PORT` (port 0: any) or
  /// `unix:PATH` (a path that does not exist yet).
  std::string address;
  int ranks = 2;
  /// The secret every follower must bring (a launcher makes a random one).
  std::string token;
  /// Bounds forming the ranks, each request that waits for an answer, and
  /// each write to a stream.
  std::chrono::milliseconds timeout{60'000};
};

/// The conductor's side, listening from `listen` on (so a launcher reads
/// `address()` and starts the followers with it) until `accept_all`.
class rank_conductor {
 public:
  rank_conductor(rank_conductor&&) noexcept;
  rank_conductor& operator=(rank_conductor&&) noexcept;
  ~rank_conductor();

  /// Binds the stream address; invalid_argument naming the field for bad
  /// options, io_error when the address cannot be bound.
  [[nodiscard]] static result<rank_conductor> listen(const rank_process_options& options);
  /// The address bound (the port the kernel chose for port 0).
  [[nodiscard]] const std::string& address() const noexcept;

  /// Waits (at most the timeout) for ranks 1..N-1 to introduce themselves
  /// with the token, refusing strangers and duplicates with a reason; hosts
  /// the data group with `groups` and tells each follower how to join it;
  /// loads rank 0 with `load` (`run.tensor_parallel` its communicator) while
  /// the followers load theirs; gives the model that drives every rank.
  /// internal naming the missing rank at the deadline; a rank's load error
  /// naming it. Once only.
  [[nodiscard]] result<std::unique_ptr<models::causal_lm>> accept_all(
      const models::run_options& run, const rank_group_factory& groups, const rank_loader& load);

 private:
  struct state;
  explicit rank_conductor(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

struct follower_options {
  std::string conductor;  ///< the conductor's stream address
  int rank = 1;
  int ranks = 2;
  std::string token;
  /// Bounds connecting (retrying while the conductor is not listening yet),
  /// the welcome, forming the data group and each write to the stream.
  std::chrono::milliseconds timeout{60'000};
};

/// A follower process's life: connects and introduces itself, joins the
/// data group as the conductor says, loads its rank with `load`, then
/// serves the conductor's stream until it says shutdown (success). A call
/// that fails aborts the data group, is reported to the conductor and ends
/// the loop with its error; so does the conductor leaving (cancelled).
[[nodiscard]] result<void> serve_as_follower(const follower_options& options,
                                             const models::run_options& run,
                                             const rank_group_factory& groups,
                                             const rank_loader& load);

/// What must agree between two ranks' pools (geometry, pages, slots,
/// blocks), as text: the conductor compares its followers' with its own.
[[nodiscard]] std::string pool_shape(const models::pool_spec& spec);

}  // namespace mstar::actors
