#pragma once

// The scheduler: continuous batching over the sequences of every request.
// Each step it picks decode rows first (one token each), then prefill chunks
// (first come, first served) within a per-step token budget and a cap on
// running sequences; a request joins at the next step and leaves the step
// after it finishes. It decides; it touches no pool. Whoever drives the step
// (engine::local_engine directly, the conductor actor through messages)
// applies its decisions to the pools and reports back: a refusal
// (`on_refused`: drop a newcomer, preempt the newest running sequence, or
// fail a sequence that cannot fit alone) or the forward's output
// (`on_ran`: sampling, stop rules, streaming deltas). CAF-free and
// single-threaded: testable without threads.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "engine/request.hpp"
#include "engine/text_stream.hpp"
#include "models/causal_lm.hpp"
#include "resources/kv/retention_policy.hpp"

namespace mstar::engine {

/// Limits of the scheduler.
struct scheduler_config {
  /// Tokens one step may feed, decode and prefill rows together.
  std::int64_t max_batched_tokens = 512;
  /// Sequences holding pool state at once (running or mid-prefill).
  std::int32_t max_running = 64;
};

/// What the scheduler knows of the model.
struct model_facts {
  std::int64_t vocab_size = 0;
  std::vector<std::int64_t> eos_token_ids;
  const models::tokenizer* tok = nullptr;  ///< null: token-id prompts only
  /// Whether generated ids extend the KV pool's prefix chain (only when its
  /// prefix cache is open): `step_result::extend` stays empty otherwise.
  bool extend_chains = false;
  /// The recurrent pool checkpoints a stream every this many tokens (0:
  /// never): prefill chunks end at those boundaries so each gets one.
  std::int64_t checkpoint_stride = 0;
  /// Whether windowed generation keeps the model's inputs right
  /// (`causal_lm::supports_windows`); requests with a window are refused
  /// otherwise.
  bool windows = true;
};

/// How steps follow each other.
enum class schedule_mode : std::uint8_t {
  /// Each step is scheduled, admitted and planned after the previous one's
  /// output has been taken in.
  sync,
  /// While step N's forward runs (on the engine's forward thread), the
  /// scheduler guesses step N+1 (`scheduler::speculate`) and the pools
  /// stage its admit; once N commits they plan it. When N's output makes
  /// the real N+1 the guessed one, the stage is promoted (exactly what
  /// inline planning would give); otherwise it is discarded. Tokens are
  /// those of `sync`, always.
  overlap,
};

/// For a step launched ahead (`next`, from `scheduler::speculate`) while
/// `running` runs: per row, the row of `running` whose draw the row feeds
/// (a one-token row of a sequence that draws in `running`), else -1; empty
/// when no row does. The forward takes those ids on the device
/// (`causal_lm::launch`'s loopback).
struct scheduled_step;
[[nodiscard]] std::vector<std::int32_t> loopback_rows(const scheduled_step& next,
                                                      const scheduled_step& running);

/// The rows of `next` (launched ahead) whose sequence `landed` (the output
/// of the step before, taken in) released: they over-ran by one step and
/// must be rolled back (`pool_set::rollback_rows`) before the releases.
struct step_result;
[[nodiscard]] std::set<request_id> overrun_rows(const scheduled_step& next,
                                                const step_result& landed);

/// "sync" / "overlap".
[[nodiscard]] std::string_view to_string(schedule_mode m) noexcept;
/// The mode named `name`, or invalid_argument naming the choices.
[[nodiscard]] result<schedule_mode> parse_schedule_mode(std::string_view name);

/// One row of a step: a sequence and the tokens it feeds.
struct scheduled_row {
  request_id rid;  ///< the sequence's id in the pools
  std::vector<token_id> tokens;
  bool samples = false;  ///< the chunk ends the known tokens: the row draws the next one
  /// Set when the row's commit ends a window of a windowed sequence: the KV
  /// pool releases what lies behind the context horizon inside that commit
  /// (`declare_retention`). A windowed sequence's chunks never cross a
  /// window's end, so a recomputed one sees what its decode saw.
  std::optional<resources::retention_policy> retention;
};

/// One step as the scheduler wants it run.
struct scheduled_step {
  std::vector<scheduled_row> rows;
  /// Draws on the device (one per row) unless some sampling row needs the
  /// logits on the host (penalties, log-probabilities, kept logits).
  bool want_logits = false;
  std::vector<models::row_sampling> draws;
  std::uint64_t serial = 0;  ///< which `schedule` call made it
  /// `speculate` only: no row was cut or left out for the token budget, so
  /// rows that turn out to end drop out without changing the others.
  bool unbounded = true;
  [[nodiscard]] bool empty() const noexcept { return rows.empty(); }
};

/// Copies the retention the rows of `step` declare into `request`'s KV step,
/// for every KV label of the row (the model declared the segments).
void declare_retention(const scheduled_step& step, models::step_request& request);

/// A sequence entering the pools.
struct registration {
  request_id rid;
  std::vector<token_id> tokens;
  std::string cache_salt;
  /// A trusted front end's keys for the prompt (`request_spec::prefix`),
  /// when `tokens` is the prompt alone; they live as long as the request.
  const prefix_wire* prefix = nullptr;
  /// The request's prompt and images (`request_spec`), for the model's
  /// `begin_sequence`; they live as long as the request.
  std::span<const token_id> prompt;
  std::span<const models::image_input> images;
};

/// Pool work the driver must do before the next `schedule`.
struct pool_actions {
  /// Sequences to remove from the pools (finished, cancelled, preempted,
  /// failed): everything they hold is freed.
  std::vector<request_id> release;
  /// Sequences to register in the pools (after the releases), with their
  /// tokens so far and their tenant's salt (page keys come from both);
  /// answer each with `set_cached`.
  std::vector<registration> registrations;
};

/// What a step's output became.
struct step_result {
  std::vector<delta> deltas;
  /// Generated ids to feed each sequence's prefix chain (pool_set::extend).
  std::vector<std::pair<request_id, std::vector<token_id>>> extend;
  pool_actions actions;
};

/// The scheduler. See the file comment.
class scheduler {
 public:
  scheduler(scheduler_config config, model_facts facts);
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  /// Checks `spec` (a non-empty prompt of ids inside the vocabulary, sane
  /// settings) without adding it; invalid_argument naming the field.
  [[nodiscard]] result<void> validate(const request_spec& spec) const;
  /// Queues a validated request (its `prompt` tokenized, its id set). Its
  /// sequences are registered in the pools only when they near the front
  /// (`admissions`), so queued requests pin no cached pages.
  [[nodiscard]] result<void> add(request_spec spec);
  /// The pool ids of a request's sequences: its id, then "id#1".."id#n-1".
  [[nodiscard]] static std::vector<request_id> sequence_ids(const request_spec& spec);
  /// Prompt tokens of sequence `rid` its pools already hold (cached pages).
  void set_cached(const request_id& rid, std::int64_t tokens);
  /// Slots where sequence `rid`'s prefill chunks end besides the checkpoint
  /// boundaries: the ends of its images inside pages (ascending), so a
  /// hybrid model's recurrent pool checkpoints the state there and a later
  /// prompt with the same text and image reuses up to the image's end. Kept
  /// only when the model checkpoints (`model_facts::checkpoint_stride`).
  void set_item_ends(const request_id& rid, std::vector<std::int64_t> slots);
  /// Cancels every sequence of request `id` at the next `schedule`; false
  /// when no such request is live.
  bool cancel(const request_id& id);

  /// The waiting sequences that may start at the next step and are not yet
  /// in the pools: register each (`registrations`) and answer with
  /// `set_cached` before calling `schedule`.
  [[nodiscard]] pool_actions admissions();
  /// The next step (empty when nothing can run). Cancellations come out
  /// first as deltas and actions (`take_pending`).
  [[nodiscard]] scheduled_step schedule();
  /// Deltas and pool work that arose outside a step (cancellations).
  [[nodiscard]] step_result take_pending();
  /// The step `schedule` will return after the last scheduled step runs,
  /// if that step's sampling rows each draw a token and none ends but by
  /// max_tokens (which is known ahead): what overlap scheduling stages in
  /// the pools while the step runs. A decode row's token is not known yet:
  /// it reads `placeholder_token` (the pools see lengths only). Empty
  /// (no guess) when sequences wait to join or a cancellation is pending,
  /// since the next step then depends on pool work still to come.
  [[nodiscard]] scheduled_step speculate() const;
  /// The token a speculated decode row carries in place of the one the
  /// running step will draw.
  static constexpr token_id placeholder_token = 0;
  /// Makes `step` (a `speculate` result launched while the last scheduled
  /// step ran, which has landed since: `on_ran`) the scheduled step, as if
  /// `schedule` had returned it; gives it its serial. Rows whose sequence
  /// ended meanwhile stay in `step` (the forward ran them) but are no one's:
  /// `on_ran` passes over them. invalid_argument when a row's sequence is
  /// live but not running.
  [[nodiscard]] result<void> adopt(scheduled_step& step);
  /// The pools refused `step` (nothing of it was kept): the step shrinks.
  /// Returns the pool work to do before scheduling again.
  [[nodiscard]] pool_actions on_refused(const scheduled_step& step, const std::string& why);
  /// `step` ran and committed with `output` (logits or drawn ids per row).
  /// Rows of a cancelled request are passed over (the next `schedule` ends
  /// it; their pools' part must be rolled back: `cancelled_rows`).
  [[nodiscard]] step_result on_ran(const scheduled_step& step,
                                   const models::forward_output& output);
  /// The pools planned `step` (admitted, about to run): each row's KV pages
  /// (the model declares one segment per row and label) raise its
  /// sequence's `kv_pages_peak`.
  void note_plans(const scheduled_step& step, const models::step_plans& plans);
  /// The rows of `step` whose request was cancelled since it was scheduled.
  [[nodiscard]] std::set<request_id> cancelled_rows(const scheduled_step& step) const;
  /// `step` failed (its pools rolled back): every sequence in it fails.
  [[nodiscard]] step_result on_failed(const scheduled_step& step, const std::string& why);

  /// Whether no request is queued or running.
  [[nodiscard]] bool idle() const noexcept { return live_.empty(); }
  [[nodiscard]] std::size_t num_running() const noexcept;
  [[nodiscard]] std::size_t num_waiting() const noexcept { return waiting_.size(); }
  /// Sequences preempted so far (a metric).
  [[nodiscard]] std::int64_t preemptions() const noexcept { return preemptions_; }

  struct sequence;

 private:
  using clock = std::chrono::steady_clock;
  struct request_entry;

  void finish(sequence& s, finish_reason why, std::string error, step_result& out);
  /// A new delta of sequence `s` at the end of `out`'s list (made in place).
  delta& new_delta(sequence& s, step_result& out);
  [[nodiscard]] result<void> take_token(sequence& s, const scheduled_row& row, std::size_t r,
                                        const models::forward_output& output, step_result& out);
  [[nodiscard]] sequence* find(const request_id& rid);
  void preempt(sequence& s, pool_actions& actions);

  scheduler_config config_;
  model_facts facts_;
  std::map<request_id, std::unique_ptr<request_entry>> live_;
  std::unordered_map<request_id, sequence*> by_rid_;
  std::size_t cancelled_live_ = 0;         ///< entries of live_ marked cancelled (0: no step looks)
  std::deque<sequence*> waiting_;          ///< by arrival; preempted ones return to the front
  std::vector<sequence*> running_;         ///< by arrival
  std::vector<sequence*> started_;         ///< sequences the last schedule moved from waiting
  std::vector<sequence*> rows_;            ///< the last scheduled step's sequences, row by row
  std::vector<std::int64_t> last_chunks_;  ///< the last scheduled step's tokens, row by row
  std::uint64_t serial_ = 0;               ///< the last scheduled step's serial
  bool hold_admissions_ = false;           ///< a newcomer was refused: none join until a step runs
  step_result pending_;
  std::uint64_t arrivals_ = 0;
  std::int64_t preemptions_ = 0;
};

}  // namespace mstar::engine
