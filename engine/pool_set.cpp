#include "engine/pool_set.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <vector>

namespace mstar::engine {
namespace {

// A non-owning pointer in the bundle's shared_ptr type: the record owns the
// step for the whole admit..commit sequence.
template <class Step>
std::shared_ptr<const resources::resource_step> borrow(const Step& step) {
  return std::shared_ptr<const resources::resource_step>(std::shared_ptr<void>{}, &step);
}

// The typed plan a pool stored in the context under its key.
template <class Plan>
result<std::shared_ptr<const Plan>> typed_plan(const resources::step_context& ctx,
                                               const std::string& key) {
  const auto it = ctx.plan_results.find(key);
  if (it == ctx.plan_results.end()) {
    return make_error(errc::not_found, fmt::format("pool '{}' returned no plan", key));
  }
  auto plan = std::dynamic_pointer_cast<const Plan>(it->second);
  if (!plan)
    return make_error(errc::invalid_argument, fmt::format("pool '{}': plan of another type", key));
  return plan;
}

}  // namespace

result<std::unique_ptr<pool_set>> pool_set::make(const models::pool_spec& spec, pool_kinds which) {
  auto set = std::unique_ptr<pool_set>(new pool_set);
  std::vector<resources::resource*> order;
  if (spec.kv && which != pool_kinds::recurrent_only) {
    auto kv = resources::kv_pool::make("kv", *spec.kv, spec.fingerprint, spec.memory);
    if (!kv)
      return kv.error().with_context("KV pool");
    set->kv_ = std::move(*kv);
    order.push_back(set->kv_.get());
  }
  if (spec.recurrent && which != pool_kinds::kv_only) {
    auto rec = resources::recurrent_state_pool::make("recurrent", *spec.recurrent, spec.memory);
    if (!rec)
      return rec.error().with_context("recurrent pool");
    set->rec_ = std::move(*rec);
    order.push_back(set->rec_.get());
  }
  auto runner = resources::step_runner::make(std::move(order));
  if (!runner)
    return runner.error();
  set->runner_ = std::make_unique<resources::step_runner>(std::move(*runner));
  return set;
}

pool_set::~pool_set() {
  runner_.reset();  // holds pointers into the pools
  kv_.reset();
  rec_.reset();
}

std::int64_t pool_set::page_size() const noexcept {
  return kv_ ? kv_->config().geometry.page_size : 1;
}

std::int64_t pool_set::key_page_size() const noexcept {
  if (kv_ && kv_->prefix_cache_open())
    return kv_->config().geometry.page_size;
  if (rec_ && rec_->config().checkpoint_slots > 0)
    return rec_->config().checkpoint_page_size;
  return 0;
}

resources::step_bundle pool_set::bundle_of(const step_record& step) const {
  resources::step_bundle bundle;
  if (!step.request)
    return bundle;
  const auto& req = *step.request;
  if (kv_ && req.kv)
    bundle.emplace(kv_->key(), borrow(*req.kv));
  if (rec_ && req.recurrent)
    bundle.emplace(rec_->key(), borrow(*req.recurrent));
  return bundle;
}

resources::full_admit_outcome pool_set::admit(step_record& step) {
  auto out = runner_->admit(bundle_of(step), step.ctx);
  step.admitted = out.ok();
  return out;
}

result<models::step_plans> pool_set::plan(step_record& step) {
  const auto bundle = bundle_of(step);
  if (auto planned = runner_->plan(bundle, step.ctx); !planned) {
    rollback(step);
    return planned.error();
  }
  models::step_plans plans;
  if (kv_ && step.request->kv) {
    auto p = typed_plan<resources::kv_plan>(step.ctx, kv_->key());
    if (!p)
      return p.error();
    plans.kv = std::move(*p);
  }
  if (rec_ && step.request->recurrent) {
    auto p = typed_plan<resources::recurrent_plan>(step.ctx, rec_->key());
    if (!p)
      return p.error();
    plans.recurrent = std::move(*p);
  }
  return plans;
}

result<void> pool_set::commit(step_record& step) {
  auto done = runner_->commit(bundle_of(step), step.ctx);
  step.admitted = false;
  return done;
}

void pool_set::rollback(step_record& step) {
  if (!step.admitted)
    return;
  runner_->rollback(bundle_of(step), step.ctx);
  step.admitted = false;
}

void pool_set::rollback_rows(step_record& step, const std::set<resources::request_id>& rows) {
  if (!step.admitted || rows.empty())
    return;
  runner_->rollback_rows(bundle_of(step), step.ctx, rows);
}

resources::full_admit_outcome pool_set::pre_admit(step_record& step) {
  return runner_->pre_admit(bundle_of(step), step.ctx);
}

result<void> pool_set::pre_plan(step_record& step) {
  auto planned = runner_->pre_plan(bundle_of(step), step.ctx);
  if (!planned)
    runner_->clear_preplan();
  return planned;
}

void pool_set::clear_preplan() {
  runner_->clear_preplan();
}

std::optional<std::int64_t> pool_set::ingest(const resources::request_id& rid,
                                             const resources::kv_prefix_seed* keys) {
  if (kv_ && keys != nullptr && kv_->prefix_cache_open() && !keys->keys.empty()) {
    kv_->ingest_request(rid, {{"main", *keys}});
  }
  if (rec_)
    rec_->ingest_request(rid, keys);
  runner_->ingest_request(rid);
  std::optional<std::int64_t> answer;
  for (auto* r : runner_->order()) {
    if (auto a = r->resolve_cached_prefix(rid))
      answer = answer ? std::min(*answer, *a) : *a;
  }
  return answer;
}

std::int64_t pool_set::apply_cached_prefix(const resources::request_id& rid, std::int64_t agreed) {
  std::int64_t kept = agreed;
  for (auto* r : runner_->order())
    kept = std::min(kept, r->apply_cached_prefix(rid, agreed));
  return kept;
}

std::int64_t pool_set::agree_cached_prefix(const resources::request_id& rid, std::int64_t agreed) {
  // Each round only shrinks, so this ends.
  for (;;) {
    const auto kept = apply_cached_prefix(rid, agreed);
    if (kept == agreed)
      return agreed;
    agreed = kept;
  }
}

void pool_set::extend(const resources::request_id& rid, std::span<const resources::token_id> ids) {
  if (kv_)
    kv_->extend_prefix_chain(rid, "main", ids);
  if (rec_)
    rec_->extend_chain(rid, ids);
}

void pool_set::remove(const resources::request_id& rid) {
  runner_->remove_request(rid);
}

pool_stats pool_set::stats() const {
  pool_stats s;
  if (kv_) {
    s.kv_pages = kv_->config().max_num_pages;
    s.kv_free_pages = kv_->num_free_pages();
    s.kv_cached_pages = kv_->num_cached_pages();
    s.kv_evictable_pages = kv_->num_evictable_pages();
  }
  if (rec_) {
    s.slots = rec_->config().max_slots;
    s.free_slots = rec_->num_free_slots();
    const auto c = rec_->checkpoints();
    s.checkpoint_slots = c.slots;
    s.checkpoints = c.held;
    s.checkpoints_captured = c.captured;
    s.checkpoints_evicted = c.evicted;
    s.checkpoint_hits = c.hits;
    s.checkpoint_hit_tokens = c.hit_tokens;
  }
  return s;
}

result<void> pool_set::check_invariants() const {
  if (kv_) {
    if (auto ok = kv_->check_invariants(); !ok)
      return ok.error().with_context("KV pool");
  }
  if (rec_) {
    if (auto ok = rec_->check_invariants(); !ok)
      return ok.error().with_context("recurrent pool");
  }
  return {};
}

}  // namespace mstar::engine
