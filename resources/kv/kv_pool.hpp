#pragma once

// The paged KV pool (reference §3.5-3.6, ARCHITECTURE.md): page-major storage
// with page 0 as the sink, per-(request, label) streams, the step cycle
// (admit / rollback / plan / commit, pre-planning), forks, retention, and
// prefix reuse through a rooted prefix index. Plain bookkeeping over one
// arena: one owner (the pool actor) calls it; no locks, no threads.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "kernels/page_ops.hpp"
#include "resources/kv/config.hpp"
#include "resources/kv/generation.hpp"
#include "resources/kv/keys.hpp"
#include "resources/kv/page_arena.hpp"
#include "resources/kv/prefix_index.hpp"
#include "resources/kv/transfer.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources {

/// Addressing of one plan label's rows, in the packed order of the step's
/// segments: what the attention kernels read (int32, host).
struct kv_label_plan {
  std::vector<std::int32_t> rows;           ///< index of each row's segment in the step
  std::vector<std::int32_t> qo_indptr;      ///< [rows+1] cumulative tokens to compute
  std::vector<std::int32_t> kv_indptr;      ///< [rows+1] cumulative page counts
  std::vector<std::int32_t> kv_indices;     ///< [kv_indptr.back()] page ids, row after row
  std::vector<std::int32_t> last_page_len;  ///< [rows] slots used on each row's last page
  /// Decode fast path: every row computes exactly one token, written at
  /// (decode_page[r], decode_offset[r]). Empty otherwise.
  bool decode = false;
  std::vector<std::int32_t> decode_page;
  std::vector<std::int32_t> decode_offset;
};

/// A KV pool's whole plan for one step.
struct kv_plan : plan_result {
  std::map<std::string, kv_label_plan> labels;
  std::vector<fork> pre_forks;
  std::vector<fork> post_forks;
};

/// What one stream looks like from outside (tests, `mstar-tool sim`, metrics).
struct kv_stream_info {
  std::int64_t stored_len = 0;
  std::int64_t released = 0;
  std::int64_t protected_prefix = 0;
  std::vector<page_id> pages;
  std::uint64_t generation = 0;
  std::uint64_t reset_generation = 0;
  std::int64_t leased_pages = 0;
};

/// A request's page keys as the preprocess stage sends them, per label:
/// unrooted keys (one per page, the last may name a partial page), the ids
/// on the partial last page, and the prompt length in slots.
struct kv_prefix_seed {
  std::vector<digest256> keys;
  std::vector<token_id> tail;
  /// Items on the partial last page (an image ending inside it): generated
  /// ids get the slots they leave, and the page's key names them (§1.10).
  std::vector<page_item> tail_items;
  /// The prompt's length in slots; absent for an ids-only prompt, whose
  /// keys and tail give it.
  std::optional<std::uint64_t> slots;
  /// The root the keys were folded from (empty: unrooted); the first
  /// generated page of a prompt shorter than a page folds it in too.
  std::vector<std::uint8_t> root;
  /// Items (images) ending strictly inside a page, with their unrooted end
  /// keys (reference §1.7): a prompt with the same slots up to such an end
  /// reuses the head of that page, whatever follows it.
  std::vector<item_end> ends;
};

/// The seed of a keyed prompt (`key_prompt` at `page_size` from `root`):
/// its keys, its tail with the items on that partial page, its slots.
[[nodiscard]] kv_prefix_seed make_prefix_seed(prompt_keys keyed, std::int64_t page_size,
                                              byte_view root = {});

/// The chain a seed starts generation keying from (`start_page_chain` on
/// the prompt the seed describes), as the pool starts each keyed stream's.
[[nodiscard]] result<page_chain> start_page_chain(const kv_prefix_seed& seed,
                                                  std::int64_t page_size);

/// The seed of what a Python preprocess stage sends for one stream (§1.8):
/// `prefix_keys` (unrooted), `prefix_tail` and `prefix_layout` rows, paged
/// at `page_size`. Fails, naming the field, when the rows are malformed or
/// the keys and tail do not describe the slots the rows cover. The rows'
/// end keys become the seed's `ends`.
[[nodiscard]] result<kv_prefix_seed> prefix_seed_from_rows(std::vector<digest256> keys,
                                                           std::vector<token_id> tail,
                                                           std::span<const prefix_span> rows,
                                                           std::int64_t page_size);

/// The paged KV pool. See the file comment.
class kv_pool final : public resource {
 public:
  /// A pool over a fresh zeroed arena from `memory` (host memory when
  /// empty; kernels/arena.hpp), or invalid_argument for a bad config and
  /// the arena's error when it cannot be made. `model_fingerprint` names the
  /// weights (empty: none known); the prefix cache opens only when the
  /// config enables it and either the model or a salt is named, since two
  /// builds differing only in weights must never share keys.
  [[nodiscard]] static result<std::unique_ptr<kv_pool>> make(
      std::string key, kv_pool_config config, std::string model_fingerprint = {},
      const kernels::arena_factory& memory = {});
  ~kv_pool() override;

  // resource
  [[nodiscard]] const std::string& key() const override { return key_; }
  [[nodiscard]] admit_outcome admit(const resource_step& step, step_context& ctx) override;
  void rollback_admit(const resource_step& step, step_context& ctx) override;
  void rollback_rows(const resource_step& step, step_context& ctx,
                     const std::set<request_id>& rows) override;
  [[nodiscard]] result<std::shared_ptr<const plan_result>> plan(const resource_step& step,
                                                                step_context& ctx) override;
  [[nodiscard]] result<void> commit(const resource_step& step, step_context& ctx) override;
  [[nodiscard]] bool supports_preplan() const override { return true; }
  void clear_preplan() override;
  void ingest_request(const request_id& rid) override;
  void remove_request(const request_id& rid) override;
  void reset_request(const request_id& rid, bool free) override;
  [[nodiscard]] std::optional<std::int64_t> resolve_cached_prefix(const request_id& rid) override;
  std::int64_t apply_cached_prefix(const request_id& rid, std::int64_t agreed) override;

  /// Registers a request with its page keys (idempotent: a second ingest
  /// keeps the first seed). `prefix_cache = false` opts the request out.
  void ingest_request(const request_id& rid, std::map<std::string, kv_prefix_seed> seeds,
                      bool prefix_cache = true);

  /// Sampled ids appended to a stream, so pages they fill get keys and
  /// become reusable by the next turn (reference §1.10).
  void extend_prefix_chain(const request_id& rid, const std::string& label,
                           std::span<const token_id> ids);

  /// Protects the first `tokens` of a stream from release; between steps
  /// only, before any release, idempotent at the same value.
  [[nodiscard]] result<void> protect_prefix(const request_id& rid, const std::string& label,
                                            std::int64_t tokens);
  /// Releases up to `tokens` from the front past the protected prefix,
  /// page-floored; returns tokens actually freed. Refused under an admitted
  /// step.
  [[nodiscard]] result<std::int64_t> release_oldest(const request_id& rid, const std::string& label,
                                                    std::int64_t tokens);

  // Moving a stream between pools (disaggregated prefill / decode;
  // kv_pool_transfer.cpp). Export side: export_stream, then remove_request
  // whenever, then release_export once the importer has the bytes. Import
  // side: import_stream, the transfer agent fills `fetch`, then
  // finish_import (or abort_import).

  /// Describes stream (rid, label) for another pool and places an export
  /// hold on its pages (one owner each, sealed: neither this stream nor
  /// anyone else writes them again while held), so the request may be
  /// removed and the pages stay as they are until `release_export`. While
  /// held, admit refuses steps on the stream. The copies of the stream's
  /// item ends the index holds (reference §1.7) travel and are held too
  /// (`kv_export::ends`). Errors: no such stream, a
  /// stream under an admitted step or still importing, one with released
  /// front pages (windowed: not supported yet), or one already exported
  /// (export is not idempotent: `release_export` first).
  [[nodiscard]] result<kv_export> export_stream(const request_id& rid, const std::string& label);
  /// Drops every export hold of `rid` (every label); pages nobody else holds
  /// return to the free queue. not_found when `rid` holds none.
  [[nodiscard]] result<void> release_export(const request_id& rid);
  /// Whether `rid` has export holds here.
  [[nodiscard]] bool exported(const request_id& rid) const { return exports_.contains(rid); }

  /// Creates stream (rid, label) holding `from.stored_len` tokens: each
  /// exported page is adopted when this pool's prefix index holds its rooted
  /// key under an equal root (and the request has not opted out), otherwise
  /// a fresh page is taken, evicting cached pages only when that makes it
  /// fit. All or nothing: out_of_range naming the pages short when the pool
  /// cannot hold the stream, invalid_argument for a stream that exists or
  /// an export of another geometry, and nothing changed. The export's end
  /// copies this index lacks get free pages (`kv_import::end_fetch`), as
  /// many as are free after the stream's. Until `finish_import` the stream
  /// is refused by admit.
  [[nodiscard]] result<kv_import> import_stream(const request_id& rid, const std::string& label,
                                                const kv_export& from);
  /// The bytes of every importing stream of `rid` landed: indexes their
  /// whole pages under their keys and their end copies under their end keys
  /// (equal roots, open cache) and makes them admittable, as if computed
  /// here. not_found when none is importing.
  [[nodiscard]] result<void> finish_import(const request_id& rid);
  /// Gives back exactly what `import_stream` took for every importing stream
  /// of `rid` (fresh pages and end copies to the front of the free queue,
  /// newest first, and the adopted pages' references) and deletes those
  /// streams. not_found
  /// when none is importing.
  [[nodiscard]] result<void> abort_import(const request_id& rid);
  /// Whether a stream of `rid` is imported but not finished.
  [[nodiscard]] bool importing(const request_id& rid) const;
  /// The labels of `rid`'s streams, sorted.
  [[nodiscard]] std::vector<std::string> labels(const request_id& rid) const;
  /// The prefix index (null when the cache is closed), for inspection.
  [[nodiscard]] const prefix_index* index() const { return index_.get(); }

  [[nodiscard]] std::int32_t num_free_pages() const { return arena_.num_free(); }
  [[nodiscard]] std::int32_t num_cached_pages() const { return index_ ? index_->size() : 0; }
  /// Cached pages nobody but the prefix cache holds (the next to evict).
  [[nodiscard]] std::int32_t num_evictable_pages() const {
    return index_ ? static_cast<std::int32_t>(index_->evictable()) : 0;
  }
  [[nodiscard]] bool prefix_cache_open() const { return index_ != nullptr; }
  [[nodiscard]] const digest256& root() const { return root_; }
  [[nodiscard]] const kv_pool_config& config() const { return config_; }
  [[nodiscard]] std::optional<kv_stream_info> stream(const request_id& rid,
                                                     const std::string& label) const;
  /// Every stream, "rid/label" -> info, sorted.
  [[nodiscard]] std::map<std::string, kv_stream_info> streams() const;
  [[nodiscard]] const page_arena& pages() const { return arena_; }
  /// Bytes of page `p` (every layer, K and V), for kernels and tests: a
  /// device address when the arena is device memory.
  [[nodiscard]] std::byte* page_data(page_id p) {
    return storage_->data() + p * config_.geometry.page_bytes();
  }
  /// The arena the pages live in (its kind, its stream's status).
  [[nodiscard]] kernels::arena& storage() { return *storage_; }
  [[nodiscard]] const kernels::arena& storage() const { return *storage_; }
  /// The pages' shape, as the page operations and kernels address them.
  [[nodiscard]] const kernels::kv_geometry& geometry() const { return config_.geometry; }

  /// Conservation (reference §3.6.7 list): free and owned partition the
  /// pages; owner counts equal references from the index, streams, leases
  /// and export holds (+1 for the sink); shared pages are sealed; a stream's
  /// partial frontier page has exactly one owner (two while exported); every
  /// pending import names an importing stream.
  [[nodiscard]] result<void> check_invariants() const;

 private:
  struct chain_state;
  struct stream_state;
  struct request_state;
  struct alloc_record {
    request_id rid;
    std::string label;
    std::vector<page_id> pages;
    bool created_stream = false;
  };
  struct staged_preplan;

  kv_pool(std::string key, kv_pool_config config, std::string model_fingerprint,
          std::unique_ptr<kernels::arena> storage);

  stream_state& stream_for(const request_id& rid, const std::string& label, bool* created);
  stream_state* find_stream(const request_id& rid, const std::string& label);
  const stream_state* find_stream(const request_id& rid, const std::string& label) const;
  [[nodiscard]] admit_outcome admit_impl(const kv_step& step, const step_context& ctx,
                                         std::vector<alloc_record>& record);
  void undo(std::vector<alloc_record>& record);
  /// Why `step`'s declared retention cannot be adopted, or empty.
  [[nodiscard]] std::string check_retention(const kv_step& step) const;
  [[nodiscard]] std::shared_ptr<kv_plan> build_plan(const kv_step& step, const step_context& ctx,
                                                    bool pre_forks_pending);
  [[nodiscard]] std::shared_ptr<kv_plan> recycled_plan();
  void apply_forks(const kv_step& step, const step_context& ctx, bool post);
  void convert_lease(stream_state& s);
  void index_pages(const request_id& rid, const std::string& label, stream_state& s);
  // Item ends (kv_pool_ends.cpp, reference §1.7 and §3.6.7 "image ends").
  [[nodiscard]] std::optional<std::int64_t> lease_item_end(stream_state& s);
  /// Serves `tokens` (inside a page) with an end lease whose source is the
  /// page they end in, held whole by the lease or an end copy's; false when
  /// neither holds it or no page is left for the copy.
  [[nodiscard]] bool lease_head(stream_state& s, std::int64_t tokens);
  [[nodiscard]] std::optional<page_id> take_head_page();
  void release_end_lease(stream_state& s);
  void convert_end_lease(stream_state& s);
  void index_item_ends(stream_state& s);
  /// The copies of `s`'s item ends the index holds, for an export keying
  /// its first `keyed_pages` pages.
  [[nodiscard]] std::vector<kv_end_page> exported_ends(const stream_state& s,
                                                       std::size_t keyed_pages) const;
  /// Fresh pages for the export's end copies this index lacks (free pages
  /// only), into `s.import_ends` and `out.end_fetch`.
  void take_import_ends(stream_state& s, const kv_export& from, kv_import& out);
  /// At finish_import: indexes the whole pages of a stream imported without
  /// a chain and the end copies; the stream gives the copies up.
  void index_import(stream_state& s);
  /// Gives back the end copies an unfinished import took: to the front of
  /// the free queue as taken (`exact`), or released.
  void drop_import_ends(stream_state& s, bool exact);
  std::int64_t release_front(stream_state& s, std::int64_t tokens);
  void free_stream(stream_state& s);
  void purge_records(const request_id& rid);
  [[nodiscard]] result<void> check_transfers() const;
  /// Whether `from`'s rooted keys name the same bytes here, for `rid`.
  [[nodiscard]] bool shares_keys(const request_id& rid, const kv_export& from) const;
  /// Per exported page, the local page holding its key, or -1.
  [[nodiscard]] std::vector<page_id> adoptable(const request_id& rid, const kv_export& from) const;
  [[nodiscard]] result<void> check_export(const kv_export& from) const;
  [[nodiscard]] std::optional<chain_state> make_chain(const kv_prefix_seed& seed) const;
  [[nodiscard]] std::int64_t pages_for(std::int64_t tokens) const {
    return (tokens + config_.geometry.page_size - 1) / config_.geometry.page_size;
  }

  std::string key_;
  kv_pool_config config_;
  std::unique_ptr<kernels::arena> storage_;
  page_arena arena_;
  std::unique_ptr<prefix_index> index_;
  digest256 root_{};
  std::unordered_map<request_id, std::unique_ptr<request_state>> requests_;
  std::vector<alloc_record> unwind_;
  std::unique_ptr<staged_preplan> staged_;
  /// Export holds by request and label: the pages each hold references.
  std::unordered_map<request_id, std::map<std::string, std::vector<page_id>>> exports_;
  /// Pending imports in import order: the fresh pages each took.
  std::vector<alloc_record> imports_;
  std::uint64_t step_epoch_ = 0;

  // Per-step scratch, reused so the decode path allocates nothing: what each
  // stream must hold, and each segment's stream (valid for `streams_step_`
  // until the step commits or anything removes streams).
  struct need_entry {
    stream_state* st;
    std::int64_t len;
    const request_id* rid;
    const std::string* label;
  };
  std::vector<need_entry> scratch_needs_;
  std::vector<std::shared_ptr<kv_plan>> plan_cache_;  ///< plans handed out, refilled once released
  std::vector<stream_state*> step_streams_;
  const kv_step* streams_step_ = nullptr;
  stream_state* step_stream(const kv_step& step, const step_context& ctx, std::size_t i);
  void forget_step_streams() { streams_step_ = nullptr; }
};

}  // namespace mstar::resources
