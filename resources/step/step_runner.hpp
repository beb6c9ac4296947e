#pragma once

// The step runner (reference kv-keys-windowing §3.3, recurrent-specrows
// §4.4-4.5): drives every resource of a model through one step in dependency
// order, unwinds a refused admit across resources and agrees a cached prefix.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources {

/// What admitting a step across every resource answers: the first refusal
/// with the key of the resource that refused (so eviction can be scoped to
/// it), or an admission whose `ready` is the AND over the resources.
struct full_admit_outcome {
  admit_outcome outcome;
  /// Key of the refusing resource; empty when admitted, or when the bundle
  /// itself was malformed and no resource was asked.
  std::string failed_resource;

  /// Whether every resource admitted the step.
  [[nodiscard]] bool ok() const noexcept { return outcome.ok; }
  /// Whether every resource admitted the step and is ready to run it.
  [[nodiscard]] bool ready() const noexcept { return outcome.ok && outcome.ready; }
};

/// Calls a fixed set of resources for each step, in an order where every
/// resource follows its dependencies. The runner holds non-owning pointers:
/// the caller (the actor owning the pools) keeps every resource alive and in
/// place for the runner's whole lifetime. Not thread-safe, like the resources
/// it drives: one owner calls it.
///
/// A step bundle may leave resources out (they sit the step out) but may not
/// name a resource the runner does not hold, nor carry a null step.
class step_runner {
 public:
  /// A runner over `resources`, ordered topologically by `depends_on()`: it
  /// repeatedly takes the earliest resource, in the given order, whose
  /// dependencies are all placed, so an order that already satisfies the
  /// dependencies is kept as given. invalid_argument, naming
  /// the resources involved, for a null pointer, a duplicate key, a
  /// self-dependency, an unknown dependency, a dependency cycle (its members
  /// in cycle order), or a pre-planning resource with a dependency that does
  /// not pre-plan (its pre-plan would read the running step's plan).
  [[nodiscard]] static result<step_runner> make(std::vector<resource*> resources);

  /// Admits the bundle resource by resource in order, stopping at the first
  /// refusal. On a refusal, `rollback_admit` runs on the refusing resource
  /// and on every resource admitted before it, in reverse order, so every
  /// pool is left as before the call. A bundle naming an unknown resource or
  /// holding a null step is refused with admit_runtime_error before any
  /// resource is called.
  [[nodiscard]] full_admit_outcome admit(const step_bundle& bundle, step_context& ctx);

  /// Undoes an admitted step: `rollback_admit` on every resource the bundle
  /// names, in reverse order, so every pool is as before the admit. The one
  /// unwind path: `admit` uses it for a refusal, and a driver uses it when
  /// planning or the kernels fail after the admit. A no-op for resources
  /// after their commit.
  void rollback(const step_bundle& bundle, step_context& ctx);
  /// `rollback_rows` on every resource the bundle names, in reverse order:
  /// `rows` of an admitted step are undone, the others still commit.
  void rollback_rows(const step_bundle& bundle, step_context& ctx,
                     const std::set<request_id>& rows);

  /// Clears `ctx.plan_results`, then plans in order, storing each plan under
  /// its resource key so a dependent reads its dependencies' plans from
  /// `ctx`. Stops at the first error, returned with the resource key as
  /// context. Precondition: `admit` accepted `bundle`.
  [[nodiscard]] result<void> plan(const step_bundle& bundle, step_context& ctx);

  /// Commits in order; stops at the first error, returned with the resource
  /// key as context. Precondition: `plan` succeeded for `bundle`.
  [[nodiscard]] result<void> commit(const step_bundle& bundle, step_context& ctx);

  /// `admit` over the pre-planning resources only, with `ctx.is_preplan`
  /// set for the call (restored afterwards). Stages step N+1 while step N
  /// runs; the later full `admit` of the same step finds the stage (each
  /// resource detects its own; the runner keeps no record of it).
  [[nodiscard]] full_admit_outcome pre_admit(const step_bundle& bundle, step_context& ctx);

  /// `plan` over the pre-planning resources only, with `ctx.is_preplan` set
  /// for the call (restored afterwards). Like `plan`, clears
  /// `ctx.plan_results` first.
  [[nodiscard]] result<void> pre_plan(const step_bundle& bundle, step_context& ctx);

  /// Drops the staged pre-plan of every pre-planning resource.
  void clear_preplan();

  /// Asks every resource how much of `rid`'s prompt it could serve from
  /// cache; the smallest answer wins and is applied to every resource that
  /// answered (those without an opinion are not told). nullopt, applying
  /// nothing, when no resource answered.
  [[nodiscard]] std::optional<std::int64_t> resolve_cached_prefix(const request_id& rid);

  /// Registers `rid` with every resource, in order.
  void ingest_request(const request_id& rid);
  /// Forgets `rid` in every resource, dependents before their dependencies
  /// (reverse order), so nothing still refers to state already freed.
  void remove_request(const request_id& rid);
  /// Rewinds `rid` in every resource, in reverse order like `remove_request`;
  /// `free` hands its storage back.
  void reset_request(const request_id& rid, bool free);

  /// Every resource, each after its dependencies.
  [[nodiscard]] const std::vector<resource*>& order() const noexcept { return order_; }
  /// The resources that support pre-planning, in `order()`'s order.
  [[nodiscard]] const std::vector<resource*>& preplan_order() const noexcept {
    return preplan_order_;
  }

 private:
  step_runner(std::vector<resource*> order, std::vector<resource*> preplan_order)
      : order_(std::move(order)), preplan_order_(std::move(preplan_order)) {}

  [[nodiscard]] result<void> check_bundle(const step_bundle& bundle) const;
  [[nodiscard]] full_admit_outcome admit_over(const std::vector<resource*>& resources,
                                              const step_bundle& bundle, step_context& ctx);
  /// `rollback_admit` on the first `reached` resources of `resources` that
  /// the bundle names, newest first.
  void rollback_over(const std::vector<resource*>& resources, std::size_t reached,
                     const step_bundle& bundle, step_context& ctx);
  [[nodiscard]] result<void> plan_over(const std::vector<resource*>& resources,
                                       const step_bundle& bundle, step_context& ctx);

  std::vector<resource*> order_;
  std::vector<resource*> preplan_order_;
};

}  // namespace mstar::resources
