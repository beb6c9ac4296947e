#pragma once

// The in-process API: start the engine (its actors in an actor system of
// its own, or in the application's), submit requests from any thread, read
// each request's deltas from a move-only handle (blocking `next()`) or a
// callback, cancel, read counters, stop. examples/embed.cpp shows it whole.
//
//   auto rt = mstar::actors::runtime::start({.model = "path/to/model"});
//   auto h = (*rt)->submit(spec);
//   while (auto d = h.next()) std::cout << d->text;

#include <caf/fwd.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/pool_regions.hpp"
#include "core/result.hpp"
#include "engine/local_engine.hpp"
#include "engine/request.hpp"
#include "models/causal_lm.hpp"

namespace mstar::actors {

struct engine_stats;
class delta_queue;

/// How to start a runtime.
struct runtime_options {
  std::string model;             ///< model folder
  models::run_options run;       ///< device and precision
  engine::engine_config engine;  ///< scheduler limits and pool sizes
  /// Scheduler threads of the runtime's own actor system (0: CAF's
  /// default, one per core). The conductor and pool actors are bookkeeping
  /// that waits on each other: on one thread their round trips are queue
  /// operations, not wake-ups. The worker runs on a thread of its own.
  std::size_t threads = 1;
};

/// One request's stream of deltas. Move-only; destroying it before the last
/// delta cancels the request.
class request_handle {
 public:
  request_handle(request_handle&&) noexcept;
  request_handle& operator=(request_handle&&) noexcept;
  request_handle(const request_handle&) = delete;
  request_handle& operator=(const request_handle&) = delete;
  ~request_handle();

  /// The request's id.
  [[nodiscard]] const engine::request_id& id() const noexcept { return id_; }
  /// The next delta, blocking; nullopt once every sample finished.
  [[nodiscard]] std::optional<engine::delta> next();
  /// Like `next`, but gives up after `timeout` (nullopt, `done()` false).
  [[nodiscard]] std::optional<engine::delta> next_for(std::chrono::milliseconds timeout);
  /// Whether every sample finished and every delta was read.
  [[nodiscard]] bool done() const;
  /// Cancels the request at the next step boundary (its last delta then
  /// says `cancelled`).
  void cancel();

 private:
  friend class runtime;
  friend class deployment;
  request_handle(engine::request_id id, std::shared_ptr<delta_queue> queue, caf::actor* conductor);
  engine::request_id id_;
  std::shared_ptr<delta_queue> queue_;
  std::shared_ptr<caf::actor> conductor_;
};

/// The runtime's counters.
struct runtime_stats {
  std::int64_t steps = 0, refused_steps = 0, generated_tokens = 0, preemptions = 0;
  std::int64_t running = 0, waiting = 0;
  std::int64_t kv_pages = 0, kv_free_pages = 0, kv_cached_pages = 0, kv_evictable_pages = 0;
  std::int64_t slots = 0, free_slots = 0;
  /// Recurrent checkpoints (hybrid prefix reuse): held; tokens resumed from them.
  std::int64_t checkpoints = 0, checkpoint_hit_tokens = 0;
  /// overlap: steps launched while the one before ran, and rows of those
  /// rolled back (their sequence ended meanwhile).
  std::int64_t ahead_steps = 0, dropped_rows = 0;
};

/// The engine as an application embeds it. Thread-safe: any thread may
/// submit, cancel and read stats; `stop` once.
class runtime {
 public:
  /// Loads `options.model`, makes its pools and starts the actors in an
  /// actor system of the runtime's own.
  [[nodiscard]] static result<std::unique_ptr<runtime>> start(const runtime_options& options);
  /// The same over an already loaded model.
  [[nodiscard]] static result<std::unique_ptr<runtime>> start(
      std::unique_ptr<models::causal_lm> model, const engine::engine_config& config,
      std::size_t threads = 1);
  /// Starts the actors inside the application's actor system, whose config
  /// registered mstar's message types (`add_message_types`). The system
  /// must outlive the runtime.
  [[nodiscard]] static result<std::unique_ptr<runtime>> start_in(
      caf::actor_system& sys, std::unique_ptr<models::causal_lm> model,
      const engine::engine_config& config);
  /// Registers mstar's message types in an application's actor-system config.
  static void add_message_types(caf::actor_system_config& cfg);

  ~runtime();  ///< stops (draining) if `stop` was not called
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Queues `spec` (ids are assigned when empty); its deltas go to the
  /// handle. A refused request still gets a handle, whose one delta says why.
  [[nodiscard]] request_handle submit(engine::request_spec spec);
  /// Queues `spec`; `on_delta` is called for each delta on an engine
  /// thread (keep it short, and thread-safe). Returns the request id.
  engine::request_id submit(engine::request_spec spec,
                            std::function<void(const engine::delta&)> on_delta);
  /// Cancels request `id` (no effect when it already ended).
  void cancel(const engine::request_id& id);
  /// Counters of the scheduler and the pools; an error when the engine is gone.
  [[nodiscard]] result<runtime_stats> stats();
  /// On a GPU, one throwaway request (a one-token prefill, then a decode
  /// step) so library set-up is not paid by the first real request.
  [[nodiscard]] result<void> warm_up();
  /// Every pool's conservation invariant (checked inside its actor).
  [[nodiscard]] result<void> check_pools();
  /// Waits until every submitted request finished, then stops the actors.
  /// Later submissions fail. Idempotent.
  void stop();

  /// The conductor and the pool actors, for actors of the same system that
  /// drive the runtime by messages (a deployment's node actor).
  [[nodiscard]] caf::actor conductor() const;
  [[nodiscard]] std::vector<caf::actor> pool_actors() const;
  /// Where the pools' bytes are (for a node's transfer agent to register),
  /// and what keeps them alive.
  [[nodiscard]] std::pair<pool_regions, std::shared_ptr<const void>> pool_memory() const;

  /// The model (its tokenizer, vocabulary...), read-only.
  [[nodiscard]] const models::causal_lm& model() const noexcept { return *model_; }

 private:
  struct parts;
  runtime() = default;
  [[nodiscard]] static result<std::unique_ptr<runtime>> launch(
      std::unique_ptr<runtime> rt, std::unique_ptr<models::causal_lm> model,
      const engine::engine_config& config);
  [[nodiscard]] engine::request_id name(engine::request_spec& spec);

  std::unique_ptr<caf::actor_system_config> own_config_;
  std::unique_ptr<caf::actor_system> own_system_;
  caf::actor_system* sys_ = nullptr;
  std::shared_ptr<const models::causal_lm> model_;
  std::unique_ptr<parts> parts_;
  std::atomic<std::uint64_t> next_id_{0};
  std::once_flag stopped_;
};

/// Submits `requests` together and waits for every delta: the completions
/// in order (a failed request says so in its completion).
[[nodiscard]] std::vector<engine::completion> complete(runtime& rt,
                                                       std::vector<engine::request_spec> requests);

}  // namespace mstar::actors
