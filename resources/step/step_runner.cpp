#include "resources/step/step_runner.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace mstar::resources {
namespace {

using key_index = std::map<std::string, std::size_t>;

std::string quoted(const std::string& key) {
  return "\"" + key + "\"";
}

std::string slot_name(std::size_t i) {
  return "resources[" + std::to_string(i) + "]";
}

// Sets ctx.is_preplan for a pre-pass and restores the caller's value after.
class preplan_scope {
 public:
  explicit preplan_scope(step_context& ctx) : ctx_(ctx), saved_(ctx.is_preplan) {
    ctx_.is_preplan = true;
  }
  ~preplan_scope() { ctx_.is_preplan = saved_; }
  preplan_scope(const preplan_scope&) = delete;
  preplan_scope& operator=(const preplan_scope&) = delete;

 private:
  step_context& ctx_;
  bool saved_;
};

// Position of every key in `resources`, or the first null pointer, duplicate
// key, self-dependency or unknown dependency.
result<key_index> index_keys(const std::vector<resource*>& resources) {
  key_index index;
  for (std::size_t i = 0; i < resources.size(); ++i) {
    if (resources[i] == nullptr)
      return make_error(errc::invalid_argument, slot_name(i) + " is null");
    const auto [it, inserted] = index.emplace(resources[i]->key(), i);
    if (!inserted)
      return make_error(errc::invalid_argument, "duplicate resource key " + quoted(it->first) +
                                                    " (" + slot_name(it->second) + " and " +
                                                    slot_name(i) + ")");
  }
  for (const resource* r : resources) {
    for (const std::string& dep : r->depends_on()) {
      if (dep == r->key())
        return make_error(errc::invalid_argument, "resource " + quoted(dep) + " depends on itself");
      if (!index.contains(dep))
        return make_error(errc::invalid_argument, "resource " + quoted(r->key()) + " depends on " +
                                                      quoted(dep) +
                                                      ", which is not among the resources");
    }
  }
  return index;
}

// The first dependency of resources[i] that is not placed yet, if any.
std::optional<std::size_t> unplaced_dependency(const std::vector<resource*>& resources,
                                               const key_index& index,
                                               const std::vector<bool>& placed, std::size_t i) {
  for (const std::string& dep : resources[i]->depends_on()) {
    const std::size_t j = index.at(dep);
    if (!placed[j])
      return j;
  }
  return std::nullopt;
}

// Names one cycle among the unplaced resources. Every unplaced resource has
// an unplaced dependency (else it would have been placed), so walking those
// edges from any of them must come back to a resource already walked.
error cycle_error(const std::vector<resource*>& resources, const key_index& index,
                  const std::vector<bool>& placed) {
  std::size_t i =
      static_cast<std::size_t>(std::find(placed.begin(), placed.end(), false) - placed.begin());
  std::vector<std::size_t> walked;
  while (std::find(walked.begin(), walked.end(), i) == walked.end()) {
    walked.push_back(i);
    i = *unplaced_dependency(resources, index, placed, i);
  }
  std::string members;
  std::string path;
  for (auto it = std::find(walked.begin(), walked.end(), i); it != walked.end(); ++it) {
    members += (members.empty() ? "" : ", ") + quoted(resources[*it]->key());
    path += resources[*it]->key() + " -> ";
  }
  return make_error(errc::invalid_argument, "resources " + members + " form a dependency cycle: " +
                                                path + resources[i]->key());
}

// Repeatedly places the earliest resource, in the given order, whose
// dependencies are all placed (a stable Kahn sort; O(n^2), n is a handful).
result<std::vector<resource*>> topological_order(const std::vector<resource*>& resources,
                                                 const key_index& index) {
  std::vector<bool> placed(resources.size(), false);
  std::vector<resource*> order;
  while (order.size() < resources.size()) {
    std::size_t next = 0;
    while (next < resources.size() &&
           (placed[next] || unplaced_dependency(resources, index, placed, next)))
      ++next;
    if (next == resources.size())
      return cycle_error(resources, index, placed);
    placed[next] = true;
    order.push_back(resources[next]);
  }
  return order;
}

// A pre-plan runs beside the in-flight step, so a pre-planning resource
// reading a non-pre-planning dependency's plan would read that step's plan.
result<void> check_preplan_dependencies(const std::vector<resource*>& resources,
                                        const key_index& index) {
  for (const resource* r : resources) {
    if (!r->supports_preplan())
      continue;
    for (const std::string& dep : r->depends_on()) {
      if (!resources[index.at(dep)]->supports_preplan())
        return make_error(errc::invalid_argument,
                          "resource " + quoted(r->key()) + " supports pre-planning but its " +
                              "dependency " + quoted(dep) + " does not; every pre-planning " +
                              "resource's dependencies must also pre-plan");
    }
  }
  return {};
}

}  // namespace

result<step_runner> step_runner::make(std::vector<resource*> resources) {
  auto index = index_keys(resources);
  if (!index)
    return index.error();
  auto order = topological_order(resources, *index);
  if (!order)
    return order.error();
  if (auto checked = check_preplan_dependencies(resources, *index); !checked)
    return checked.error();
  std::vector<resource*> preplan;
  std::copy_if(order->begin(), order->end(), std::back_inserter(preplan),
               [](const resource* r) { return r->supports_preplan(); });
  return step_runner{std::move(order).value(), std::move(preplan)};
}

full_admit_outcome step_runner::admit(const step_bundle& bundle, step_context& ctx) {
  return admit_over(order_, bundle, ctx);
}

result<void> step_runner::plan(const step_bundle& bundle, step_context& ctx) {
  return plan_over(order_, bundle, ctx);
}

result<void> step_runner::commit(const step_bundle& bundle, step_context& ctx) {
  if (auto checked = check_bundle(bundle); !checked)
    return checked;
  for (resource* r : order_) {
    const auto entry = bundle.find(r->key());
    if (entry == bundle.end())
      continue;
    if (auto done = r->commit(*entry->second, ctx); !done)
      return done.error().with_context(r->key());
  }
  return {};
}

full_admit_outcome step_runner::pre_admit(const step_bundle& bundle, step_context& ctx) {
  const preplan_scope scope{ctx};
  return admit_over(preplan_order_, bundle, ctx);
}

result<void> step_runner::pre_plan(const step_bundle& bundle, step_context& ctx) {
  const preplan_scope scope{ctx};
  return plan_over(preplan_order_, bundle, ctx);
}

void step_runner::clear_preplan() {
  for (resource* r : preplan_order_)
    r->clear_preplan();
}

std::optional<std::int64_t> step_runner::resolve_cached_prefix(const request_id& rid) {
  std::vector<resource*> answered;
  std::optional<std::int64_t> agreed;
  for (resource* r : order_) {
    if (const auto tokens = r->resolve_cached_prefix(rid)) {
      answered.push_back(r);
      agreed = agreed ? std::min(*agreed, *tokens) : *tokens;
    }
  }
  // Until every resource keeps what it is given (each round only shrinks).
  while (agreed) {
    std::int64_t kept = *agreed;
    for (resource* r : answered)
      kept = std::min(kept, r->apply_cached_prefix(rid, *agreed));
    if (kept == *agreed)
      break;
    agreed = kept;
  }
  return agreed;
}

void step_runner::ingest_request(const request_id& rid) {
  for (resource* r : order_)
    r->ingest_request(rid);
}

void step_runner::remove_request(const request_id& rid) {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    (*it)->remove_request(rid);
}

void step_runner::reset_request(const request_id& rid, bool free) {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    (*it)->reset_request(rid, free);
}

result<void> step_runner::check_bundle(const step_bundle& bundle) const {
  for (const auto& entry : bundle) {
    // A named reference, not a structured binding: clang 14 (the ASan and
    // fuzzing trees) cannot capture a binding in a lambda.
    const std::string& key = entry.first;
    if (entry.second == nullptr)
      return make_error(errc::invalid_argument, "step bundle entry " + quoted(key) + " is null");
    if (std::none_of(order_.begin(), order_.end(),
                     [&key](const resource* r) { return r->key() == key; }))
      return make_error(errc::invalid_argument, "step bundle names resource " + quoted(key) +
                                                    ", which this runner does not hold");
  }
  return {};
}

full_admit_outcome step_runner::admit_over(const std::vector<resource*>& resources,
                                           const step_bundle& bundle, step_context& ctx) {
  if (auto checked = check_bundle(bundle); !checked)
    return {admit_outcome::refused(admit_runtime_error{checked.error().message()}), {}};
  bool ready = true;
  for (std::size_t i = 0; i < resources.size(); ++i) {
    resource* r = resources[i];
    const auto entry = bundle.find(r->key());
    if (entry == bundle.end())
      continue;
    admit_outcome outcome = r->admit(*entry->second, ctx);
    if (!outcome.ok) {
      // The refuser is included: its admit may have touched state before
      // refusing, and rollback of nothing taken is a no-op.
      rollback_over(resources, i + 1, bundle, ctx);
      return {std::move(outcome), r->key()};
    }
    ready = ready && outcome.ready;
  }
  return {ready ? admit_outcome::admitted() : admit_outcome::waiting(), {}};
}

void step_runner::rollback(const step_bundle& bundle, step_context& ctx) {
  rollback_over(order_, order_.size(), bundle, ctx);
}

void step_runner::rollback_rows(const step_bundle& bundle, step_context& ctx,
                                const std::set<request_id>& rows) {
  for (std::size_t i = order_.size(); i-- > 0;) {
    const auto entry = bundle.find(order_[i]->key());
    if (entry != bundle.end())
      order_[i]->rollback_rows(*entry->second, ctx, rows);
  }
}

void step_runner::rollback_over(const std::vector<resource*>& resources, std::size_t reached,
                                const step_bundle& bundle, step_context& ctx) {
  for (std::size_t i = reached; i-- > 0;) {
    const auto entry = bundle.find(resources[i]->key());
    if (entry != bundle.end())
      resources[i]->rollback_admit(*entry->second, ctx);
  }
}

result<void> step_runner::plan_over(const std::vector<resource*>& resources,
                                    const step_bundle& bundle, step_context& ctx) {
  if (auto checked = check_bundle(bundle); !checked)
    return checked;
  ctx.plan_results.clear();
  for (resource* r : resources) {
    const auto entry = bundle.find(r->key());
    if (entry == bundle.end())
      continue;
    auto planned = r->plan(*entry->second, ctx);
    if (!planned)
      return planned.error().with_context(r->key());
    ctx.plan_results[r->key()] = std::move(planned).value();
  }
  return {};
}

}  // namespace mstar::resources
