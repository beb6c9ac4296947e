#pragma once

// The pools a model runs on, owned together with the step runner that
// drives them: typed steps in, typed plans out, one unwind path
// (`step_runner::rollback`). The engine's direct loop owns one pool_set
// holding every pool; at run time each pool actor owns a pool_set holding
// just its own pool. CAF-free and single-threaded, like the pools.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/result.hpp"
#include "engine/publication.hpp"
#include "models/causal_lm.hpp"
#include "resources/step/step_runner.hpp"

namespace mstar::engine {

/// Which of a spec's pools a pool_set makes.
enum class pool_kinds : std::uint8_t { all, kv_only, recurrent_only };

/// One step on its way through the pools: the typed request, the context
/// the pools share, and how far it got.
struct step_record {
  /// Shared read-only with whoever else handles the step (the worker, the
  /// other pools); the pools borrow from it between admit and commit.
  std::shared_ptr<const models::step_request> request;
  resources::step_context ctx;
  bool admitted = false;
};

/// Counts for metrics and tests.
struct pool_stats {
  std::int64_t kv_pages = 0, kv_free_pages = 0, kv_cached_pages = 0;
  std::int64_t kv_evictable_pages = 0;  ///< cached pages only the prefix cache holds
  std::int64_t slots = 0, free_slots = 0;
  /// Recurrent checkpoints: slots, held; captured, evicted; requests that
  /// resumed from one and the prompt tokens they skipped.
  std::int64_t checkpoint_slots = 0, checkpoints = 0;
  std::int64_t checkpoints_captured = 0, checkpoints_evicted = 0;
  std::int64_t checkpoint_hits = 0, checkpoint_hit_tokens = 0;
};

/// The pools of one model (or one of them). See the file comment.
class pool_set {
 public:
  /// Makes the pools `spec` names (those `which` selects) on `spec.memory`.
  [[nodiscard]] static result<std::unique_ptr<pool_set>> make(const models::pool_spec& spec,
                                                              pool_kinds which = pool_kinds::all);
  ~pool_set();
  pool_set(const pool_set&) = delete;
  pool_set& operator=(const pool_set&) = delete;

  [[nodiscard]] resources::kv_pool* kv() noexcept { return kv_.get(); }
  [[nodiscard]] resources::recurrent_state_pool* recurrent() noexcept { return rec_.get(); }
  [[nodiscard]] std::int64_t page_size() const noexcept;
  /// The page size the pools here key prompts at (the KV pool's prefix
  /// cache or the recurrent pool's checkpoints), 0 when none keys them.
  [[nodiscard]] std::int64_t key_page_size() const noexcept;

  /// Admits `step` in every pool it names, in dependency order; a refusal
  /// has been unwound already (every pool as before) and names the pool.
  [[nodiscard]] resources::full_admit_outcome admit(step_record& step);
  /// The plans of an admitted step. On error the admit is rolled back.
  [[nodiscard]] result<models::step_plans> plan(step_record& step);
  /// Records an admitted, planned step's consumption.
  [[nodiscard]] result<void> commit(step_record& step);
  /// Undoes an admitted step that will not commit (the kernels failed).
  void rollback(step_record& step);
  /// Undoes `rows` of an admitted step only (rows a step launched ahead ran
  /// for sequences that ended meanwhile); the rest of it still commits.
  void rollback_rows(step_record& step, const std::set<resources::request_id>& rows);

  /// Stages `step` (the next one, guessed) while the current step runs:
  /// its admit in the pools that pre-plan (`step.ctx.is_preplan` for the
  /// call). Only what `clear_preplan` undoes changes. The later live admit
  /// and plan of an equal step take the stage over (promotion); a different
  /// step discards it. A refusal leaves nothing staged.
  [[nodiscard]] resources::full_admit_outcome pre_admit(step_record& step);
  /// Plans the staged step (after the running step committed: positions
  /// read the stored lengths it left).
  [[nodiscard]] result<void> pre_plan(step_record& step);
  /// Drops whatever is staged.
  void clear_preplan();

  /// Registers a request; with `keys` (the prompt's unrooted page keys and
  /// partial tail, from the preprocess stage) its cached prefix may be
  /// reused. Returns the prompt tokens this pool set could serve from cache
  /// (not yet agreed: see `apply_cached_prefix`), nullopt when no pool keeps
  /// a cache.
  [[nodiscard]] std::optional<std::int64_t> ingest(const resources::request_id& rid,
                                                   const resources::kv_prefix_seed* keys);
  /// Keeps `agreed` tokens of the cached prefix (the smallest answer of every
  /// pool set the request is in); returns what every pool here keeps, which
  /// is less when the recurrent pool can resume only at a shallower
  /// checkpoint: apply that everywhere then (one round per pool set).
  std::int64_t apply_cached_prefix(const resources::request_id& rid, std::int64_t agreed);
  /// `apply_cached_prefix` until every pool here keeps what it is given;
  /// returns that length.
  std::int64_t agree_cached_prefix(const resources::request_id& rid, std::int64_t agreed);
  /// Feeds generated ids to the prefix chain so the pages they fill become
  /// reusable.
  void extend(const resources::request_id& rid, std::span<const resources::token_id> ids);
  /// Frees everything the request holds; its indexed pages stay cached.
  void remove(const resources::request_id& rid);

  // Disaggregated prefill / decode (pool_set_transfer.cpp). Every call
  // covers the pools this set holds, so a one-pool set (a pool actor's)
  // publishes and adopts its own part; `publication::merge` and
  // `adoption::merge` assemble the parts.

  /// Exports every stream `rid` holds in every pool of the set and holds
  /// their pages and slots until `release_publication` (the request may be
  /// removed meanwhile). All or nothing: on an error (no streams, a stream
  /// mid-step or windowed, an earlier publication still held) no hold is
  /// placed.
  [[nodiscard]] result<publication> publish(const resources::request_id& rid);
  /// Drops the holds `publish` placed. not_found when none is held.
  [[nodiscard]] result<void> release_publication(const resources::request_id& rid);
  /// Imports `from`'s parts for the pools this set holds (KV first, then
  /// recurrent): pages held here under the same keys are adopted, the rest
  /// and the slots are taken fresh and listed for the transfer agent. All
  /// or nothing across pools: a refusal (out_of_range: pages or slots
  /// short; invalid_argument: the request already has streams here, or the
  /// publication lacks a part a pool of this set needs) undoes every
  /// import. Until `finish_adopt` the streams are refused by admit.
  [[nodiscard]] result<adoption> adopt(const resources::request_id& rid, const publication& from);
  /// The transfer landed: the adopted streams become admittable, as if
  /// computed here. not_found when nothing is being adopted.
  [[nodiscard]] result<void> finish_adopt(const resources::request_id& rid);
  /// Gives back exactly what `adopt` took. not_found when nothing is being
  /// adopted.
  [[nodiscard]] result<void> abort_adopt(const resources::request_id& rid);

  [[nodiscard]] pool_stats stats() const;
  /// Every pool's conservation invariant.
  [[nodiscard]] result<void> check_invariants() const;

 private:
  pool_set() = default;
  [[nodiscard]] resources::step_bundle bundle_of(const step_record& step) const;

  std::unique_ptr<resources::kv_pool> kv_;
  std::unique_ptr<resources::recurrent_state_pool> rec_;
  std::unique_ptr<resources::step_runner> runner_;
};

}  // namespace mstar::engine
