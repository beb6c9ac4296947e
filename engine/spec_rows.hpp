#pragma once

// A speculative step's per-row objects (the seed's `mstar.worker.spec_rows`).
// The overlap scheduler builds step N+1 while step N runs; N+1's continuing
// rows take every input from N's outputs, which do not exist yet. This file
// holds what N+1 needs per row without waiting for them: the row inputs,
// deferred until read (`deferred_row_inputs`), and each row's own copy of the
// loop counters (`loop_counter_snapshots`). Threading N's outputs in only
// moves handle lists and tests key presence, so it may run while N's kernels
// still write those tensors. Reference: recurrent-specrows-protocol.md §3.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "engine/request.hpp"

namespace mstar::engine {

/// An opaque handle to a tensor some step produced. Rows only carry, move and
/// compare handles: the pointee's type is erased, so nothing here can read a
/// value, which is what makes threading safe while the producing kernels run.
/// Copying a handle shares the tensor (as Python shares the list's tensors).
struct tensor_ref {
  std::shared_ptr<const void> data;  ///< the tensor, type-erased; may be null in tests
  std::string tag;                   ///< a name for logs and tests

  friend bool operator==(const tensor_ref&, const tensor_ref&) = default;
};

/// The tensors one signal brings to one row.
using tensor_list = std::vector<tensor_ref>;
/// One row's inputs: signal (input edge) name to its tensors.
using row_inputs = std::map<std::string, tensor_list, std::less<>>;
/// Loop name to iteration index (`dynamic_loop_iter_counts`).
using loop_counts = std::map<std::string, std::int64_t, std::less<>>;

/// The shared per-request forward info (`CurrentForwardPassInfo`), reduced to
/// what speculation touches. The worker advances its counters when a step is
/// routed, possibly while the next step is being prepared; a speculative step
/// therefore reads a snapshot (`input_metadata`), never these counters.
struct forward_pass_info {
  loop_counts dynamic_loop_iter_counts;  ///< where the request's loops stand
};

/// One row's per-step metadata (`InputMetadata`): owned by the batch, never
/// shared with another step.
struct input_metadata {
  loop_counts dynamic_loop_iter_counts;  ///< the counters this row runs at
  tensor_list stream_chunks;             ///< stream chunks polled for this row
};

/// The per-row inputs of a speculative step built before the step in flight
/// has produced its outputs (`DeferredRowInputs`): a mapping request id to
/// `row_inputs` that keeps row order. A *template* row (no inputs of its own:
/// a continuing row) maps every declared signal to an empty list, built the
/// first time it is read; *assigned* rows (fresh rows, given the inputs their
/// pop gathered) are left alone by `set_signals` and `take_outputs`.
/// Thread-confined: one owner at a time (the plan thread, then the worker).
class deferred_row_inputs {
 public:
  deferred_row_inputs() = default;
  /// Template rows for `request_ids`, in that order, carrying `signals`.
  /// A repeated id keeps its first position.
  explicit deferred_row_inputs(std::vector<request_id> request_ids,
                               std::vector<std::string> signals = {});

  /// The row of `rid`, built now if it is a template row never read; null
  /// when there is no such row. The reference stays valid until the row is
  /// erased or dropped.
  [[nodiscard]] row_inputs* find(const request_id& rid);
  /// Gives `rid` exactly `inputs` (a fresh row): replaced in place, or
  /// appended after the last row.
  void assign(const request_id& rid, row_inputs inputs);
  /// Removes the row of `rid`; false when there was none.
  bool erase(const request_id& rid);
  [[nodiscard]] bool contains(const request_id& rid) const { return rows_.contains(rid); }
  [[nodiscard]] std::size_t size() const noexcept { return order_.size(); }

  /// The row ids in row order; iterating builds no row.
  [[nodiscard]] const std::vector<request_id>& request_ids() const noexcept { return order_; }
  [[nodiscard]] auto begin() const noexcept { return order_.begin(); }
  [[nodiscard]] auto end() const noexcept { return order_.end(); }

  /// Every template row now carries `signals`, each with no tensors,
  /// including a row already read (its mapping is reset in place, so a
  /// reference to it sees the change). Assigned and threaded rows keep theirs.
  void set_signals(std::vector<std::string> signals);
  [[nodiscard]] const std::vector<std::string>& signals() const noexcept { return signals_; }

  /// Hands the in-flight step's per-row outputs to the template rows: each
  /// declared signal's list is moved from `outputs[rid]` into the row, which
  /// stops being a template. A template row whose output for a declared
  /// signal is missing or empty is dropped: erased here and returned, in row
  /// order, for the caller to remove from its parallel tables (§3.3).
  /// Assigned rows are untouched; no tensor value is read.
  [[nodiscard]] std::vector<request_id> take_outputs(std::map<request_id, row_inputs> outputs);

  /// A plain copy of every row (template rows built first), for a path that
  /// edits rows one by one; row order is `request_ids()`'s.
  [[nodiscard]] std::map<request_id, row_inputs> materialize();

  /// How many template rows have been built so far (read, threaded or
  /// materialized): zero proves a step used no row.
  [[nodiscard]] std::size_t rows_built() const noexcept { return rows_built_; }

 private:
  enum class row_kind : std::uint8_t { template_row, assigned, threaded };
  struct row {
    row_kind kind = row_kind::template_row;
    std::optional<row_inputs> inputs;  ///< empty: a template row never read
  };

  [[nodiscard]] row_inputs template_inputs() const;
  row_inputs& built(row& r);
  void drop_order(const request_id& rid);

  std::vector<request_id> order_;
  std::unordered_map<request_id, row> rows_;
  std::vector<std::string> signals_;
  std::size_t rows_built_ = 0;
};

/// Per row, metadata carrying its own copy of the loop counters. Rows are laid
/// out continuing-first: the first `n_next_iter` rows (continuing rows on a
/// new iteration of `loop_name`) run one iteration past their shared counter
/// for it, the rest at it. Every snapshot is a copy, not a view: the shared
/// infos are not modified and later changes to them do not show. `base`,
/// when not empty, is each row's existing metadata (one per info); its other
/// fields (stream chunks) are copied into the snapshot. An empty `loop_name`
/// means no loop: counters are copied unchanged. Errors: `n_next_iter` past
/// the rows, a null info, `base` of another length, or a row to advance that
/// has no counter for `loop_name`.
[[nodiscard]] result<std::vector<input_metadata>> loop_counter_snapshots(
    std::span<const std::shared_ptr<forward_pass_info>> infos, std::string_view loop_name,
    std::size_t n_next_iter, std::span<const input_metadata> base = {});

/// Where one row of a batch stands in a loop.
struct loop_position {
  std::int64_t iter = 0;  ///< the iteration this step runs
  bool last = false;      ///< `iter + 1 == max_iters`: the loop finishes with this step
};

/// The batched stop check of a loop step: reads each row's own metadata (the
/// batch's snapshot), never the shared info, which may already be ahead.
/// Errors: `max_iters < 1`, or a row without a counter for `loop_name`.
[[nodiscard]] result<std::vector<loop_position>> check_stop_batched(
    std::span<const input_metadata> rows, std::string_view loop_name, std::int64_t max_iters);

/// A step's prepared model inputs, one per row (`batch.inputs`).
template <class Row>
struct prepared_rows {
  std::vector<std::shared_ptr<const Row>> rows;  ///< in row order
  bool running_batched = false;                  ///< one object shared by every row
};

/// `Engine.prepare_inputs` over a speculative step (§3.6). When the model's
/// `uniform_row_inputs(walk)` hook returns an object, it is valid for every
/// row: each row gets that same object and no row of `inputs` is built or
/// prepared. Otherwise `prepare_row(rid, row_inputs&)` runs once per row, in
/// row order, reading (so building) each row. Hook signatures:
/// `std::shared_ptr<const Row>(std::string_view walk)` (null: not uniform) and
/// `result<std::shared_ptr<const Row>>(const request_id&, row_inputs&)`.
template <class Row, class Uniform, class Prepare>
[[nodiscard]] result<prepared_rows<Row>> prepare_step_inputs(std::string_view walk,
                                                             deferred_row_inputs& inputs,
                                                             Uniform&& uniform_row_inputs,
                                                             Prepare&& prepare_row) {
  prepared_rows<Row> out;
  if (std::shared_ptr<const Row> shared = uniform_row_inputs(walk)) {
    out.rows.assign(inputs.size(), shared);
    out.running_batched = true;
    return out;
  }
  out.rows.reserve(inputs.size());
  for (const auto& rid : inputs) {
    result<std::shared_ptr<const Row>> row = prepare_row(rid, *inputs.find(rid));
    if (!row)
      return row.error().with_context("prepare_inputs: row '" + rid + "': ");
    out.rows.push_back(std::move(row).value());
  }
  return out;
}

/// The shared per-request infos the worker keeps, by request id.
using shared_infos = std::map<request_id, std::shared_ptr<forward_pass_info>>;

/// What the worker decided step N+1 holds (§3.2), before its rows exist.
struct speculation_plan {
  std::vector<request_id> continuing;  ///< N's rows whose loop goes on, in N's order
  std::vector<std::pair<request_id, row_inputs>> fresh;  ///< with the inputs their pop gathered
  std::vector<std::string> signals;  ///< input names the target takes from N (consumed edges)
  std::string loop_name;             ///< the target's loop; empty: none
  bool is_new_loop_iter = false;     ///< the target is the same node's next iteration
  std::map<request_id, input_metadata> metadata;  ///< existing per-row metadata; absent: empty
  std::set<request_id> final_stream_rids;
  std::set<request_id> stream_partition_done_rids;
};

/// Step N+1's rows and their parallel per-row tables. Dropping a row removes
/// it from every one of them (`drop_rows`).
struct speculative_rows {
  std::vector<request_id> request_ids;  ///< continuing rows first, then fresh
  deferred_row_inputs per_request_input_tensors;
  shared_infos per_request_info;  ///< the shared objects themselves, not copies
  std::map<request_id, input_metadata> per_request_input_metadata;  ///< the batch's snapshots
  std::set<request_id> final_stream_rids;
  std::set<request_id> stream_partition_done_rids;
  std::size_t n_continuing = 0;
  bool is_new_iter = false;             ///< continuing rows run the loop's next iteration
  std::vector<request_id> pushed_back;  ///< fresh rows already continuing: back to the queue
};

/// Builds N+1's rows: continuing template rows first, then the fresh rows
/// (a fresh row that is also continuing keeps its continuing row and is
/// pushed back). Continuing rows on a new loop iteration get counters one
/// past the shared ones; the shared infos are referenced, never modified.
/// Errors: a row without a shared info, a repeated continuing row.
[[nodiscard]] result<speculative_rows> assemble_speculation(speculation_plan plan,
                                                            const shared_infos& shared);

/// Removes `dropped` from every per-row table of `rows`.
void drop_rows(speculative_rows& rows, std::span<const request_id> dropped);

/// Threads N's per-row outputs into `rows` (§3.3): continuing rows take their
/// declared signals' lists; one missing or empty drops the row from every
/// table. Returns the dropped rows, in row order: their stream chunks go back
/// to their buffers, and a non-empty result means N+1's composition changed
/// (its pre-plan is discarded). Reads no tensor value.
[[nodiscard]] std::vector<request_id> thread_outputs(speculative_rows& rows,
                                                     std::map<request_id, row_inputs> outputs);

}  // namespace mstar::engine
