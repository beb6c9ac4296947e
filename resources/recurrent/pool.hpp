#pragma once

// The recurrent state pool (reference recurrent-specrows §1.7-1.14): fixed
// size state slots for linear-attention and SSM layers, one per (request,
// label), and which slot each row of a step addresses. Storage plus slot
// bookkeeping only; what the bytes mean is the backend's business (a
// separate resource planning against this one). Plain bookkeeping over one
// host arena per block: one owner (the pool actor) calls it; no locks.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "resources/kv/generation.hpp"
#include "resources/recurrent/config.hpp"
#include "resources/recurrent/transfer.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources {

struct kv_prefix_seed;

/// One step's work against a recurrent state pool.
///
/// There is no commit flag (unlike `kv_step`): a backend writes the pool in
/// place, so a step that must not overwrite a state reads one label and
/// writes another. Forks are byte copies of every layer and block, reserved
/// at admit and copied at plan (pre) or commit (post).
struct recurrent_step : resource_step {
  /// (from, to) label pairs copied at plan time, before the forward writes.
  std::vector<fork> pre_forks;
  /// (from, to) label pairs copied at commit time, after the forward wrote.
  std::vector<fork> post_forks;
  /// The requests the forks apply to; nullopt means every request in the
  /// step (a chunked prompt forks on its first chunk only, say).
  std::optional<std::vector<request_id>> fork_rids;
};

/// Where one label's rows live this step: the pool's whole plan output for
/// the label. Token layout (cu_seqlens, chunk tables) is the backend's.
///
/// The buffers may be longer than `num_rows` (a captured bucket's static
/// buffers are); rows past `num_rows` always hold the pad index and 0,
/// rewritten by every plan, because a recurrent kernel reads every row of
/// the batch and a stale index would write another request's slot.
struct recurrent_addressing {
  /// [>= num_rows] int32: the slot each row reads and writes, or the pool's
  /// pad index (the sink, or -1 without one) for rows that hold none.
  std::vector<std::int32_t> slot_indices;
  /// [slot_indices.size()] 0/1: whether a row resumes from its slot's state
  /// (1) or starts from zeros (0).
  std::vector<std::uint8_t> has_state;
  /// Rows of the step under this label: its segments, padding rows included.
  std::int32_t num_rows = 0;
  /// Under a graph lease: the static buffers of the lease's (bucket, capture
  /// slot, label) that the captured graph reads. They hold the same values
  /// as the vectors above, are as long, and never move for the pool's
  /// lifetime. Null for an eager plan.
  const std::int32_t* graph_slot_indices = nullptr;
  /// Under a graph lease: the static has_state buffer beside
  /// `graph_slot_indices`; null for an eager plan.
  const std::uint8_t* graph_has_state = nullptr;
};

/// A recurrent state pool's plan for one step: the addressing of every
/// label the step's segments name.
struct recurrent_plan : plan_result {
  /// Addressing by label, one entry per label with at least one segment.
  std::map<std::string, recurrent_addressing> labels;

  /// The addressing of `label` (never null), or not_found when the step has
  /// no segment under that label.
  [[nodiscard]] result<const recurrent_addressing*> addressing(
      const std::string& label = "main") const;
};

/// One layer of one block, slot-major: element (s, i...) sits at `data` +
/// s·strides_bytes[0] + Σ i_k·strides_bytes[k+1]. Contiguous, last stride
/// one element, so kernels index it by slot with no gather.
struct recurrent_block_view {
  /// First byte of slot 0 of this layer.
  std::byte* data = nullptr;
  /// Element type of the block.
  mstar::dtype dtype = mstar::dtype::float32;
  /// [max_slots, *block shape].
  std::vector<std::int64_t> shape;
  /// Byte strides of `shape`'s axes.
  std::vector<std::int64_t> strides_bytes;
};

/// The recurrent state pool. See the file comment.
///
/// Slots are handed out from a free stack that starts descending, so fresh
/// requests get ascending ids (1, 2, 3, ... with the sink, which takes slot
/// 0 first); released slots are pushed back (the last freed is the next
/// handed out) and zeroed in every layer and block. A request holds one
/// slot per label; within one step's addressing every index but the pad
/// index is unique.
class recurrent_state_pool final : public resource {
 public:
  /// The slot padding rows address when the sink is enabled.
  static constexpr std::int32_t sink_slot = 0;
  /// "No slot: skip this row", what padding rows address without a sink.
  static constexpr std::int32_t no_slot = -1;

  /// A pool with one zeroed arena per block from `memory` (host memory
  /// when empty; kernels/arena.hpp), laid out [num_layers][max_slots][*shape];
  /// invalid_argument (naming the pool) for a config `validate` rejects or
  /// one whose slot ids overflow int32, the arena's error when one cannot be
  /// made.
  [[nodiscard]] static result<std::unique_ptr<recurrent_state_pool>> make(
      std::string key, recurrent_state_config config, const kernels::arena_factory& memory = {});
  /// Frees the arenas; plans and block views into them dangle afterwards.
  ~recurrent_state_pool() override;
  /// Not copyable: plans and block views point into the pool.
  recurrent_state_pool(const recurrent_state_pool&) = delete;
  /// Not copyable: plans and block views point into the pool.
  recurrent_state_pool& operator=(const recurrent_state_pool&) = delete;

  // resource

  /// The pool's resource key.
  [[nodiscard]] const std::string& key() const override { return key_; }
  /// Reserves a slot per written (request, label) and per fork target of
  /// the fork rows; capture, padding and span <= 0 rows reserve nothing.
  /// Refuses a full pool with allocation_failed (one slot short, naming the
  /// request and label) and a repeated (request, label) or non-recurrent
  /// step with admit_runtime_error; a refusal has taken nothing.
  [[nodiscard]] admit_outcome admit(const resource_step& step, step_context& ctx) override;
  /// Frees, zeroes and pushes back, newest first, exactly the slots this
  /// step's live admit (or with `ctx.is_preplan`, its staged admit) took
  /// fresh, pre-admitted ones included, so the free list is as before the
  /// admit; slots held from earlier steps keep their state. A no-op after
  /// commit.
  void rollback_admit(const resource_step& step, step_context& ctx) override;
  /// Gives back the slots this step's live admit took fresh for `rows`;
  /// their commit then leaves has_state as it was.
  void rollback_rows(const resource_step& step, step_context& ctx,
                     const std::set<request_id>& rows) override;
  /// The step's `recurrent_plan`. A live plan copies the pre-forks first; a
  /// staged one (`ctx.is_preplan`) copies nothing and addresses fork
  /// targets as if the copy had happened, and the live plan of the same
  /// step returns that very object, copying the forks then. A stage reads
  /// has_state as it is when staged, so stage step N+1 after step N's
  /// commit (the engine gates pre-plans on commit_done). Errors (before
  /// changing anything): a non-recurrent step, a second stage, a fork
  /// target admit never reserved, more rows than a captured buffer holds.
  [[nodiscard]] result<std::shared_ptr<const plan_result>> plan(const resource_step& step,
                                                                step_context& ctx) override;
  /// Marks the written slots as holding state, copies the post-forks and
  /// forgets the step's reservations (a later rollback frees nothing).
  [[nodiscard]] result<void> commit(const resource_step& step, step_context& ctx) override;
  /// The pool stages step N+1 while step N's kernels run (after its commit).
  [[nodiscard]] bool supports_preplan() const override { return true; }
  /// Drops the staged step, freeing the slots its staged admit took (in
  /// reverse, restoring the free list) unless the live admit already took
  /// them over; never touches a live step's slots.
  void clear_preplan() override;
  /// Registers a request with no slots; idempotent.
  void ingest_request(const request_id& rid) override;
  /// Zeroes and frees every slot of the request and forgets it.
  void remove_request(const request_id& rid) override;
  /// Zeroes every slot of the request (so nothing resumes from another
  /// request's bytes); `free` hands them back, otherwise they stay held
  /// with has_state cleared. A no-op for a request holding no slot.
  void reset_request(const request_id& rid, bool free) override;

  // Moving a stream's slot between pools (disaggregated prefill / decode;
  // pool_transfer.cpp). Export side: export_slot, then remove_request
  // whenever, then release_export. Import side: import_slot, the transfer
  // agent copies the slot's bytes, then finish_import (or abort_import).

  /// Describes (rid, label)'s slot for another pool and holds it: admit
  /// refuses to write it, and reset / remove_request leave its bytes alone
  /// (a removed request's slot stays held) until `release_export`. Errors:
  /// no such slot, one still importing or reserved by the admitted step, or
  /// one already exported (export is not idempotent: `release_export`
  /// first). Drops a staged pre-plan naming the request. The "main"
  /// label's export carries the request's item-end checkpoints (reference
  /// §1.7), leased until `release_export`.
  [[nodiscard]] result<recurrent_export> export_slot(const request_id& rid,
                                                     const std::string& label = "main");
  /// Drops every export hold of `rid`; slots the request no longer holds are
  /// zeroed and freed. not_found when `rid` holds none.
  [[nodiscard]] result<void> release_export(const request_id& rid);
  /// Whether `rid` has export holds here.
  [[nodiscard]] bool exported(const request_id& rid) const { return exports_.contains(rid); }
  /// Takes a free slot for (rid, label) that will hold `from`'s state once
  /// its bytes land; admit refuses it until `finish_import`. All or nothing:
  /// out_of_range when no slot is free, invalid_argument when (rid, label)
  /// holds a slot already or `from` has another layout; nothing changed.
  /// `from`'s checkpoints this pool lacks get checkpoint slots as a capture
  /// would take them (`recurrent_import::checkpoints`), indexed at
  /// `finish_import`, given back by abort, reset and remove.
  [[nodiscard]] result<recurrent_import> import_slot(const request_id& rid,
                                                     const std::string& label,
                                                     const recurrent_export& from);
  /// The bytes landed: every importing slot of `rid` takes the exported
  /// has_state and becomes admittable. not_found when none is importing.
  [[nodiscard]] result<void> finish_import(const request_id& rid);
  /// Frees (zeroes, pushes back newest first) every importing slot of `rid`,
  /// so the free list is as before the imports. not_found when none is.
  [[nodiscard]] result<void> abort_import(const request_id& rid);
  /// Whether a slot of `rid` is imported but not finished.
  [[nodiscard]] bool importing(const request_id& rid) const;
  /// The labels `rid` holds slots for, sorted.
  [[nodiscard]] std::vector<std::string> labels(const request_id& rid) const;

  /// Records the largest batch a capturing runner announces; captured
  /// addressing buffers are sized to it when first planned. Tolerates
  /// repeated calls (the largest wins). `slots` and `max_seq_len` do not
  /// size anything here: state does not grow with sequence length.
  void build_accelerator_graph_buffers(int slots, int max_bs, int max_seq_len);

  /// The arena block `name` lives in (its kind, its status, reads for
  /// checks), or null for an unknown block.
  [[nodiscard]] kernels::arena* storage(const std::string& name);

  /// Layer `layer` of block `name`, slot-major; not_found naming the block
  /// (and the blocks there are) or out_of_range naming the layer.
  [[nodiscard]] result<recurrent_block_view> block(const std::string& name, std::int64_t layer);

  /// Slots on the free list.
  [[nodiscard]] std::int32_t num_free_slots() const noexcept {
    return static_cast<std::int32_t>(free_.size());
  }
  /// What a row holding no slot addresses: the sink (0), or -1 without one.
  [[nodiscard]] std::int32_t pad_index() const noexcept {
    return config_.disable_sink_slot ? no_slot : sink_slot;
  }
  /// The slot (rid, label) holds, if any.
  [[nodiscard]] std::optional<std::int32_t> slot_of(const request_id& rid,
                                                    const std::string& label = "main") const;
  /// Whether (rid, label)'s slot holds state a step resumes from; false
  /// without a slot.
  [[nodiscard]] bool has_state(const request_id& rid, const std::string& label = "main") const;
  /// Forks copied into (rid, label)'s slot since it was reserved; 0 without
  /// a slot.
  [[nodiscard]] std::uint64_t generation(const request_id& rid,
                                         const std::string& label = "main") const;
  /// The free stack; back() is handed out next.
  [[nodiscard]] const std::vector<std::int32_t>& free_list() const noexcept { return free_; }
  /// The config the pool was built with.
  [[nodiscard]] const recurrent_state_config& config() const noexcept { return config_; }

  // Prefix-reuse checkpoints (pool_checkpoints.cpp; config.checkpoint_slots
  // > 0). A checkpoint slot holds a request's state at a boundary every
  // `checkpoint_stride` tokens, keyed by the page key of the page ending
  // there (the KV pool's unrooted, salted keys: tenants never share). A
  // commit that leaves a stream exactly at such a boundary copies its slot
  // into a checkpoint (the least recently used unleased one goes when all
  // are taken, single-use ones first); a new request resumes from the deepest boundary of its
  // prompt that has one (`resolve_cached_prefix` leases it,
  // `apply_cached_prefix` copies it into the request's slot).

  /// Registers `rid` with its prompt's page keys (null: none, so nothing
  /// of it is checkpointed or matched); idempotent like `ingest_request`.
  void ingest_request(const request_id& rid, const kv_prefix_seed* keys);
  /// Sampled ids extend `rid`'s key chain, so decode boundaries get keys.
  void extend_chain(const request_id& rid, std::span<const token_id> ids);
  /// The deepest boundary of `rid`'s prompt (short of its last token) that
  /// has a checkpoint, leased until `apply_cached_prefix`; 0 when none;
  /// nullopt without checkpoints.
  [[nodiscard]] std::optional<std::int64_t> resolve_cached_prefix(const request_id& rid) override;
  /// Resumes `rid` from the checkpoint at `agreed` tokens: takes a slot for
  /// its "main" label and copies the checkpoint in (has_state). Returns
  /// `agreed`, or the deepest boundary below it that has a checkpoint (then
  /// nothing is copied: the caller applies that length), or 0 (no slot is
  /// free, or no checkpoint).
  std::int64_t apply_cached_prefix(const request_id& rid, std::int64_t agreed) override;
  /// Counts for metrics and tests.
  struct checkpoint_stats {
    std::int64_t slots = 0, held = 0, leased = 0;
    std::int64_t captured = 0, evicted = 0;
    std::int64_t hits = 0, hit_tokens = 0;
  };
  [[nodiscard]] checkpoint_stats checkpoints() const noexcept;
  /// Whether a checkpoint holds the state after the page named `key`.
  [[nodiscard]] bool has_checkpoint(const digest256& key) const;

  /// Conservation (reference §1.14): free + held + export holds of
  /// removed requests + sink == max_slots, no
  /// slot held twice or both held and free, the sink never handed out nor
  /// free, no duplicate on the free list, every recorded reservation still
  /// held, and every free slot zero in every layer of every block. O(bytes).
  [[nodiscard]] result<void> check_invariants() const;

 private:
  struct slot_state {
    std::int32_t index = 0;
    bool has_state = false;
    std::uint64_t generation = 0;
    std::uint64_t seen_epoch = 0;  // the admit that last addressed it (duplicate check)
    bool exported = false;         // under an export hold: never written
    bool importing = false;        // bytes not landed: never addressed
    bool imported_state = false;   // has_state once the import finishes
  };
  using label_slots = std::map<std::string, slot_state>;
  // A slot an admit took fresh, for rollback_admit / clear_preplan.
  struct reservation {
    request_id rid;
    std::string label;
    std::int32_t index = 0;
  };
  // What identifies a staged step: the live admit and plan of the same step
  // find the stage; anything else makes it stale.
  struct step_identity {
    std::vector<segment> segments;
    std::vector<fork> pre_forks;
    std::vector<fork> post_forks;
    std::optional<std::vector<request_id>> fork_rids;
    std::set<request_id> padding_rows;
    bool capture = false;
    std::optional<graph_lease> lease;
    friend bool operator==(const step_identity&, const step_identity&) = default;
  };
  // Kept across stages (only `active` says whether one is pending), so
  // staging reuses its buffers: a pipelined decode step allocates nothing.
  struct staged_preplan {
    bool active = false;
    step_identity identity;
    std::vector<reservation> reservations;  // taken by the staged admit
    bool admitted = false;                  // the live admit took them over
    std::shared_ptr<recurrent_plan> plan;   // set by the staged plan
  };
  struct block_storage {
    recurrent_block_config config;
    std::size_t slot_bytes = 0;  // one layer of one slot
    std::unique_ptr<kernels::arena> arena;
    [[nodiscard]] kernels::slot_block slots(std::size_t layers, std::size_t max_slots) const {
      return {0, layers, max_slots, slot_bytes};
    }
  };
  struct graph_key {
    int bucket_rows = 0;
    int slot = 0;
    std::string label;
    friend auto operator<=>(const graph_key&, const graph_key&) = default;
  };
  struct graph_buffer {
    std::vector<std::int32_t> slot_indices;
    std::vector<std::uint8_t> has_state;
  };

  recurrent_state_pool(std::string key, recurrent_state_config config,
                       std::map<std::string, block_storage> blocks);

  [[nodiscard]] slot_state* find_slot(const request_id& rid, const std::string& label);
  [[nodiscard]] const slot_state* find_slot(const request_id& rid, const std::string& label) const;
  void open_stage(const recurrent_step& step, const step_context& ctx);
  void close_stage();
  [[nodiscard]] bool matches_stage(const recurrent_step& step, const step_context& ctx) const;
  [[nodiscard]] admit_outcome reserve(const recurrent_step& step, const step_context& ctx,
                                      std::vector<reservation>& taken);
  /// `rid`'s slot under `label`, taken from the free list (and recorded in
  /// `taken`) where it holds none; nullptr when it holds none and none is free.
  [[nodiscard]] slot_state* take_slot(const request_id& rid, const std::string& label,
                                      std::vector<reservation>& taken);
  [[nodiscard]] admit_outcome full(const request_id& rid, const std::string& label) const;
  [[nodiscard]] admit_outcome frozen(const request_id& rid, const std::string& label,
                                     const slot_state& slot) const;
  void unwind(std::vector<reservation>& taken, std::size_t from);
  void release_slot(std::int32_t index);
  void zero_slot(std::int32_t index);
  void copy_slot(std::int32_t from, std::int32_t to);
  /// Of `candidates` (in range), those with a nonzero byte in some block
  /// and layer, in candidate order.
  [[nodiscard]] result<std::vector<std::int32_t>> nonzero_slots(
      std::span<const std::int32_t> candidates) const;
  [[nodiscard]] kernels::slot_block layout_of(const block_storage& b) const;
  void drop_stage_naming(const request_id& rid);
  [[nodiscard]] bool held_by_export(const request_id& rid, const std::string& label,
                                    std::int32_t index) const;
  [[nodiscard]] result<std::size_t> check_transfers(std::vector<std::uint8_t>& seen) const;

  // Forks (pool_forks.cpp).
  [[nodiscard]] static bool forks_apply(const recurrent_step& step, const step_context& ctx,
                                        std::size_t row);
  [[nodiscard]] result<void> check_fork_targets(const recurrent_step& step, const step_context& ctx,
                                                const std::vector<fork>& forks) const;
  void apply_forks(const recurrent_step& step, const step_context& ctx,
                   const std::vector<fork>& forks);
  [[nodiscard]] bool addressed_has_state(const recurrent_step& step, const step_context& ctx,
                                         const request_id& rid, const slot_state& slot,
                                         const std::string& label) const;
  [[nodiscard]] bool has_state_after_pre_forks(const recurrent_step& step, const request_id& rid,
                                               const std::string& label, std::size_t n) const;

  // Plans (pool_plan.cpp).
  [[nodiscard]] result<std::shared_ptr<recurrent_plan>> build_plan(const recurrent_step& step,
                                                                   const step_context& ctx);
  [[nodiscard]] result<void> bind_graph_buffers(recurrent_plan& plan, const graph_lease& lease);
  [[nodiscard]] std::shared_ptr<recurrent_plan> recycled_plan();

  std::string key_;
  recurrent_state_config config_;
  std::map<std::string, block_storage> blocks_;
  std::unordered_map<request_id, label_slots> slots_;
  std::vector<std::int32_t> free_;    // a stack: back() is handed out next
  std::vector<reservation> live_;     // what the live step's admit took fresh
  std::vector<reservation> imports_;  // pending imports, oldest first
  // Export holds by request and label. A hold whose slot the request no
  // longer holds (removed, reset) keeps the slot out of the free list.
  std::unordered_map<request_id, std::map<std::string, std::int32_t>> exports_;
  staged_preplan stage_;
  std::map<graph_key, graph_buffer> graph_buffers_;
  int graph_max_rows_ = 0;
  std::vector<std::shared_ptr<recurrent_plan>> plan_cache_;  // refilled once released
  std::uint64_t epoch_ = 0;

  // Checkpoints (pool_checkpoints.cpp).
  struct checkpoint {
    std::int32_t index = 0;
    std::uint64_t used = 0;  // LRU clock
    std::int32_t leases = 0;
    std::int64_t uses = 0;  // captures of its key and resumes from it
  };
  struct digest_hash {
    std::size_t operator()(const digest256& d) const noexcept;
  };
  // A request's key chain and how far its "main" stream got.
  struct checkpoint_stream {
    page_chain chain;
    std::vector<item_end> ends;  // also checkpointed, under their end keys
    std::int64_t prompt_slots = 0;
    std::int64_t length = 0;
    std::optional<digest256> lease;
    std::int64_t lease_tokens = 0;
    /// `apply_cached_prefix` copied a checkpoint in (`length` tokens) and
    /// no step has run since; `took_slot`: it took the "main" slot for it.
    bool resumed = false;
    bool took_slot = false;
  };
  void init_checkpoints();
  void forget_checkpoint_stream(const request_id& rid);
  void capture_checkpoint(const request_id& rid, std::int32_t slot, std::int64_t span);
  void capture_under(const digest256& key, std::int32_t slot);
  // The deepest point at most `limit` tokens in whose state a checkpoint
  // holds: a stride boundary or an item end; its key and length.
  [[nodiscard]] std::optional<std::pair<digest256, std::int64_t>> deepest_checkpoint(
      const checkpoint_stream& cs, std::int64_t limit) const;
  [[nodiscard]] std::optional<std::int32_t> take_checkpoint_slot();
  void release_lease(checkpoint_stream& cs);
  // Takes back what `apply_cached_prefix` copied in (and the slot it took
  // for it) when a later round agrees on another length.
  void undo_resume(const request_id& rid, checkpoint_stream& cs);
  [[nodiscard]] result<void> check_checkpoints() const;
  // Checkpoints moving with a stream (pool_transfer.cpp).
  [[nodiscard]] std::vector<recurrent_checkpoint> export_checkpoints(const request_id& rid);
  void release_export_checkpoints(const request_id& rid);
  void import_checkpoints(const request_id& rid, const recurrent_export& from,
                          recurrent_import& out);
  void finish_checkpoint_imports(const request_id& rid);
  void drop_checkpoint_imports(const request_id& rid);
  std::unordered_map<digest256, checkpoint, digest_hash> ckpt_index_;
  // Checkpoints an export holds (a lease each), and slots an unfinished
  // import took for checkpoints, by request.
  std::unordered_map<request_id, std::vector<digest256>> ckpt_exports_;
  std::unordered_map<request_id, std::vector<recurrent_checkpoint>> ckpt_imports_;
  std::vector<std::int32_t> ckpt_free_;
  std::unordered_map<request_id, checkpoint_stream> ckpt_streams_;
  std::uint64_t ckpt_clock_ = 0;
  checkpoint_stats ckpt_counts_;
};

}  // namespace mstar::resources
