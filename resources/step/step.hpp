#pragma once

// The resource step protocol (ARCHITECTURE.md "The step protocol"; reference
// kv-keys-windowing §3.1-3.3): the vocabulary every pool speaks. A step is a
// batch of segments; each resource receives its own step type, admits
// (reserves or refuses), plans (an immutable addressing record), lets the
// kernels run, then commits. Plain data and one interface: no threads, no
// actors; a pool actor owns a resource and calls it.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.hpp"

namespace mstar::resources {

/// A request's id, as the conductor names it.
using request_id = std::string;

/// One (request, label) stream active in a step. `span` tokens are written
/// (0: a read-only segment: admit reserves nothing, commit is a no-op). The
/// order of a step's segments is the packed per-token layout kernels see.
struct segment {
  request_id rid;
  std::string label = "main";
  std::int64_t span = 0;

  friend bool operator==(const segment&, const segment&) = default;
  friend auto operator<=>(const segment&, const segment&) = default;
};

/// A label pair `(from, to)`: copy stream `from` into stream `to` of the same
/// request, before the step's writes (a pre-fork, at plan) or after them (a
/// post-fork, at commit). KV and recurrent steps both carry them.
using fork = std::pair<std::string, std::string>;

/// A captured graph's claim on static addressing buffers: which capture
/// slot replays and the row count of its bucket.
struct graph_lease {
  int slot = 0;
  int bucket_rows = 0;
  friend bool operator==(const graph_lease&, const graph_lease&) = default;
};

/// Base of every resource's step type (`kv_step`, `recurrent_step`, ...).
struct resource_step {
  virtual ~resource_step() = default;
  std::vector<segment> segments;
};

/// Base of every resource's plan output: an immutable record placed into the
/// step context for dependent resources and the kernels.
struct plan_result {
  virtual ~plan_result() = default;
};

/// Engine-owned state of one step, shared by every resource in it.
struct step_context {
  std::vector<request_id> request_ids;  ///< rows of the batch, in order
  std::set<request_id> padding_rows;    ///< bucket padding rows: reserve nothing, address sinks
  bool capture = false;                 ///< a graph-capture run: nothing is kept or indexed
  bool is_preplan = false;              ///< this pass stages step N+1 while N runs
  std::optional<graph_lease> lease;     ///< set when a captured graph replays this step
  /// Plans of resources already planned this step, by resource key.
  std::map<std::string, std::shared_ptr<const plan_result>> plan_results;

  [[nodiscard]] bool is_padding_row(const request_id& rid) const {
    return padding_rows.contains(rid);
  }
};

/// The pool lacked pages (or slots) for a (request, label): `pages_short` more
/// would have been needed after evicting every cached page it could.
struct allocation_failed {
  std::string message;
  std::int64_t pages_short = 0;
  std::string label;
  request_id rid;
};

/// The request is being offloaded to host memory; retry after it reloads.
struct request_offloading {
  std::string message;
  std::string label;
  request_id rid;
};

/// The step can never be admitted as written (terminal for the request).
struct admit_runtime_error {
  std::string message;
};

/// Why a resource refused a step.
using admit_refusal = std::variant<allocation_failed, request_offloading, admit_runtime_error>;

/// The human-readable message of any refusal.
[[nodiscard]] const std::string& refusal_message(const admit_refusal& r);

/// What `admit` answers: admitted (and ready to run, or admitted but waiting
/// on something such as a transfer), or refused with a reason.
struct admit_outcome {
  bool ok = true;
  bool ready = true;
  std::optional<admit_refusal> reason;

  [[nodiscard]] static admit_outcome admitted() { return {}; }
  [[nodiscard]] static admit_outcome waiting() { return {true, false, std::nullopt}; }
  [[nodiscard]] static admit_outcome refused(admit_refusal why) {
    return {false, false, std::move(why)};
  }
};

/// A pool or other per-step resource. Calls for one step come in the order
/// admit -> plan -> commit, or admit -> rollback_admit when some resource
/// refused. Not thread-safe: one owner (an actor) calls it.
class resource {
 public:
  virtual ~resource() = default;

  /// This resource's key in step bundles and plan results; fixed for the
  /// resource's lifetime.
  [[nodiscard]] virtual const std::string& key() const = 0;
  /// Keys of resources that must be admitted and planned before this one.
  [[nodiscard]] virtual std::vector<std::string> depends_on() const { return {}; }

  /// Reserves what `step` needs or refuses; a refusal has taken nothing.
  [[nodiscard]] virtual admit_outcome admit(const resource_step& step, step_context& ctx) = 0;
  /// Returns exactly the reservations this step's admit took fresh, in
  /// reverse order, leaving free lists as they were before the admit. The
  /// runner also calls it on the resource that refused (whose refusal took
  /// nothing), so it must tolerate an admit that reserved nothing.
  virtual void rollback_admit(const resource_step& step, step_context& ctx) = 0;
  /// The same for some rows of an admitted step only (a step launched
  /// ahead whose rows over-ran: their sequences ended before it landed):
  /// what the admit took fresh for `rows` goes back, and `rows` join
  /// `ctx.padding_rows`, so the step's commit passes over them while the
  /// other rows commit. Bytes the kernels already wrote for them are not
  /// restored: the driver removes these sequences (see local_engine).
  virtual void rollback_rows(const resource_step& step, step_context& ctx,
                             const std::set<request_id>& rows) {
    (void)step;
    ctx.padding_rows.insert(rows.begin(), rows.end());
  }
  /// The addressing record for the kernels (never null). Pre-forks are
  /// copied here.
  [[nodiscard]] virtual result<std::shared_ptr<const plan_result>> plan(const resource_step& step,
                                                                        step_context& ctx) = 0;
  /// Records the step's consumption (lengths grow, pages indexed, retention
  /// applied, post-forks copied).
  [[nodiscard]] virtual result<void> commit(const resource_step& step, step_context& ctx) = 0;

  /// Whether admit and plan may run for step N+1 while step N runs.
  [[nodiscard]] virtual bool supports_preplan() const { return false; }
  /// Drops a staged pre-plan, undoing exactly what staging changed.
  virtual void clear_preplan() {}

  /// Registers a request; idempotent (one call per partition of a request).
  virtual void ingest_request(const request_id& rid) { (void)rid; }
  /// Forgets a request and frees everything it holds.
  virtual void remove_request(const request_id& rid) { (void)rid; }
  /// Rewinds a request; `free` hands its storage back to the pool.
  virtual void reset_request(const request_id& rid, bool free) {
    (void)rid;
    (void)free;
  }

  /// Tokens of the request's prompt this resource could serve from cache,
  /// or nullopt when it has no opinion (it keeps no cache).
  [[nodiscard]] virtual std::optional<std::int64_t> resolve_cached_prefix(const request_id& rid) {
    (void)rid;
    return std::nullopt;
  }
  /// The length every resource agreed on (the smallest answer); a resource
  /// that answered more gives the excess back. Returns the tokens it keeps:
  /// `agreed`, or less when it can resume only at certain lengths (the
  /// recurrent pool's checkpoints); the caller then applies the smaller
  /// length everywhere, until every resource keeps what it is given. So
  /// the rounds settle on the longest length all can keep, each answers
  /// the most it can keep up to `agreed`, and a later, smaller round takes
  /// back what an earlier one set up past it.
  virtual std::int64_t apply_cached_prefix(const request_id& rid, std::int64_t agreed) {
    (void)rid;
    return agreed;
  }
};

/// One step's work for every resource, by resource key. A resource without
/// an entry sits the step out.
using step_bundle = std::map<std::string, std::shared_ptr<const resource_step>>;

}  // namespace mstar::resources
