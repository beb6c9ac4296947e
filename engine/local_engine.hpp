#pragma once

// The engine's step cycle in one thread, without actors: the scheduler
// decides, the pool set admits and plans, the model runs, the pools commit,
// the scheduler turns the output into deltas. Tests, benchmarks and tools
// drive it directly; the conductor actor (actors/) runs the same cycle with
// each pool and the model behind its own actor.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "engine/pool_set.hpp"
#include "engine/request.hpp"
#include "engine/scheduler.hpp"
#include "models/causal_lm.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::engine {

/// One step as it ran, for tools and the overlap checker: the rows that
/// count (a step launched ahead loses the rows whose sequence ended before
/// it landed) and their output.
struct step_trace {
  std::uint64_t serial = 0;
  std::span<const scheduled_row> rows;
  const models::step_plans* plans = nullptr;
  const models::forward_output* output = nullptr;
  /// Launched before the step ahead of it landed (overlap), and how many of
  /// its rows were dropped (rolled back) for sequences that ended meanwhile.
  bool ahead = false;
  std::size_t dropped = 0;
  /// Each row's row in `plans` (they keep the dropped rows); empty: the same.
  std::span<const std::size_t> plan_rows;
};

/// Limits and pool sizes of an engine.
struct engine_config {
  scheduler_config scheduler;
  models::pool_options pools;
  /// How steps follow each other (engine/README.md, "Overlap scheduling");
  /// unset: `default_schedule` of the model.
  std::optional<schedule_mode> schedule;
  /// Called after each step's forward, before its output is taken in.
  std::function<void(const step_trace&)> on_step;
  /// Where pools the model keeps on the host get their bytes (e.g. named
  /// shared-memory segments a same-host peer maps,
  /// kernels::shared_memory_arena_factory); empty: private memory. Pools on
  /// a device ignore it.
  kernels::arena_factory host_memory;
};

/// Counters for metrics and benchmarks.
struct engine_counters {
  std::int64_t steps = 0;
  std::int64_t refused_steps = 0;
  std::int64_t prompt_tokens = 0;     ///< fed in prefill rows
  std::int64_t generated_tokens = 0;  ///< drawn
  std::int64_t ahead_steps = 0;       ///< overlap: steps launched while the one before ran
  std::int64_t dropped_rows = 0;      ///< rows of those rolled back: their sequence had ended
};

/// The schedule a model runs best under: overlap on a GPU (its forward is
/// queued, and the host builds the next step meanwhile: 1.02-1.36x sync's
/// decode tokens/s on the H200), sync on the CPU (its forward runs at
/// launch, so there is nothing to hide: overlap measured 0.87-0.99 of sync).
[[nodiscard]] schedule_mode default_schedule(const models::causal_lm& model) noexcept;

/// Pool work a scheduler decision asks for, applied to a pool set and the
/// model: releases (the model's `end_sequence`), then registrations (its
/// `begin_sequence`) answered with their cached prefix.
void apply_actions(const pool_actions& actions, pool_set& pools, scheduler& sched,
                   models::causal_lm& model);

/// Registers sequence `rid` with `tokens` (keyed under `cache_salt`) in
/// `pools` and returns the cached tokens every pool agreed on (applied
/// already).
std::int64_t register_sequence(pool_set& pools, const request_id& rid,
                               std::span<const token_id> tokens, std::string_view cache_salt = {},
                               const prefix_wire* prefix = nullptr);

/// As above for a sequence laid out as `layout` (its ids and one item per
/// image, `layout_prompt`): the page keys name the images, so only the same
/// image in the same place shares the pages it touches, while pages wholly
/// before it are shared with any prompt that has the same ids there. An
/// empty layout (one that could not be made) keys nothing.
std::int64_t register_sequence(pool_set& pools, const request_id& rid,
                               std::span<const token_id> tokens,
                               std::span<const resources::prompt_span> layout,
                               std::string_view cache_salt, const prefix_wire* prefix);

/// The direct engine. Not thread-safe: one thread calls it.
class local_engine {
 public:
  /// Makes the model's pools, binds the model to them.
  [[nodiscard]] static result<std::unique_ptr<local_engine>> make(
      std::unique_ptr<models::causal_lm> model, engine_config config);
  ~local_engine();

  /// Tokenizes (when `spec.text` is set), checks and queues a request;
  /// names it when `spec.id` is empty. Returns its id.
  [[nodiscard]] result<request_id> submit(request_spec spec);
  /// Cancels a request at the next step; false when it is not live.
  bool cancel(const request_id& id);
  /// Runs one step (shrinking it while the pools refuse) and returns its
  /// deltas; none when idle.
  [[nodiscard]] result<std::vector<delta>> step();
  [[nodiscard]] bool idle() const noexcept { return sched_->idle() && !cur_; }
  /// Whether a step was launched ahead and runs now (overlap, between
  /// calls): a request submitted now joins the step after it.
  [[nodiscard]] bool step_in_flight() const noexcept { return cur_.has_value(); }

  /// On a GPU, one throwaway request (a one-token prefill, then a decode
  /// step) so library set-up is not paid by the first real request. The
  /// pools end as they were.
  [[nodiscard]] result<void> warm_up();

  [[nodiscard]] models::causal_lm& model() noexcept { return *model_; }
  [[nodiscard]] pool_set& pools() noexcept { return *pools_; }
  [[nodiscard]] scheduler& sched() noexcept { return *sched_; }
  [[nodiscard]] const engine_counters& counters() const noexcept { return counters_; }

 private:
  /// A step whose forward was launched and not yet finished.
  struct in_flight {
    scheduled_step step;
    step_record rec;
    models::step_plans plans;
    std::uint64_t ticket = 0;
    bool committed = false;  ///< its pools' commit ran (at the next step's launch)
    bool ahead = false;      ///< launched before the step ahead of it landed
    std::size_t dropped = 0;
    /// Per row: the row of the step before whose draw it feeds (-1: none).
    std::vector<std::int32_t> loopback;
  };
  local_engine();
  void collect(step_result res, std::vector<delta>& out);
  /// Schedules a step and launches it (the sync way: after the previous
  /// step landed), shrinking it while the pools refuse. Leaves `cur_`
  /// empty when there is nothing to run.
  [[nodiscard]] result<void> launch_next(std::vector<delta>& out);
  /// Overlap: the step after `cur_`, as the scheduler foresees it, admitted,
  /// planned and launched while `cur_` still runs (its decode rows take
  /// their ids from `cur_`'s draws on the device); `cur_` commits first.
  /// Nothing when no step can be foreseen or the pools refuse it.
  [[nodiscard]] result<std::optional<in_flight>> launch_ahead();
  /// Commits `f`'s pools, after rolling back its cancelled rows.
  [[nodiscard]] result<void> commit(in_flight& f);
  /// Waits for `f`'s forward and undoes its admit when not committed (a
  /// failure path).
  void abandon(in_flight& f);

  engine_config config_;
  std::unique_ptr<models::causal_lm> model_;
  std::unique_ptr<pool_set> pools_;  // after the model: freed first, the model's backend last
  std::unique_ptr<scheduler> sched_;
  engine_counters counters_;
  std::uint64_t next_id_ = 0;
  std::optional<in_flight> cur_;  ///< the step running (overlap keeps one between calls)
};

/// A finished request, every delta merged: what tools and tests compare.
struct completion {
  request_id id;
  std::vector<token_id> prompt;
  /// Per sample (n of them): tokens, text, why it ended, kept logits.
  std::vector<std::vector<token_id>> tokens;
  std::vector<std::string> text;
  std::vector<finish_reason> finished;
  std::vector<std::vector<std::vector<float>>> logits;
  std::vector<std::string> errors;
  usage counts;  ///< of sample 0
  double time_to_first_token_s = 0;
  double duration_s = 0;
};

/// Merges deltas into completions by request id.
class completion_collector {
 public:
  void expect(const request_spec& spec);
  void add(const delta& d);
  [[nodiscard]] std::vector<completion> take();

 private:
  std::vector<completion> done_;
  std::map<request_id, std::size_t> index_;
  std::map<request_id, std::chrono::steady_clock::time_point> started_;
};

/// Submits `requests` together and steps until all finished. Fails on a
/// refused submission or a broken step; a request that failed reports it in
/// its completion (`finished` = error, `errors`).
[[nodiscard]] result<std::vector<completion>> run_to_completion(local_engine& engine,
                                                                std::vector<request_spec> requests);

}  // namespace mstar::engine
