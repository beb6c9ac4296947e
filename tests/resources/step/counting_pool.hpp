#pragma once

// Test support for the step runner tests: a real little slot pool with a
// free stack, configurable to refuse, wait, fail, answer cached prefixes,
// declare dependencies and pre-plan, and a few helpers. Test code only.

#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "resources/step/step.hpp"
#include "resources/step/step_runner.hpp"

namespace mstar::resources::test_support {

/// What a counting pool addresses for a step, and what it read of its
/// dependencies' plans while planning.
struct pool_plan final : plan_result {
  std::vector<int> slots;
  std::map<std::string, std::vector<int>> dependency_slots;
};

/// How a counting pool behaves; every field may be changed between calls.
struct pool_options {
  int slots = 4;
  std::vector<std::string> depends_on;
  bool preplan = false;
  bool refuse = false;  // refuse every admit, whatever is free
  bool wait = false;    // admit, but not ready
  bool fail_plan = false;
  bool fail_commit = false;
  std::optional<std::int64_t> cached;  // answer to resolve_cached_prefix

  // Chainable setters: GCC warns on designated initializers that leave
  // fields out, and most pools set one or two.
  pool_options& with_slots(int n) { return slots = n, *this; }
  pool_options& after(std::vector<std::string> keys) { return depends_on = std::move(keys), *this; }
  pool_options& preplanning() { return preplan = true, *this; }
  pool_options& waiting() { return wait = true, *this; }
  pool_options& failing_plan() { return fail_plan = true, *this; }
  pool_options& caching(std::int64_t tokens) { return cached = tokens, *this; }
};

/// A real little slot pool: one slot per written segment, taken off a free
/// stack at admit, owned by the request at commit, returned at removal. Every
/// call is appended to a shared log as "<key>.<call>", "(pre)" marking a
/// call made with ctx.is_preplan.
class counting_pool final : public resource {
 public:
  counting_pool(std::string key, pool_options opts, std::vector<std::string>* log)
      : options(std::move(opts)), key_(std::move(key)), log_(log) {
    for (int slot = options.slots - 1; slot >= 0; --slot)
      free_.push_back(slot);
  }

  const std::string& key() const override { return key_; }
  std::vector<std::string> depends_on() const override { return options.depends_on; }
  bool supports_preplan() const override { return options.preplan; }

  admit_outcome admit(const resource_step& step, step_context& ctx) override {
    note("admit", ctx);
    if (staged_ && !ctx.is_preplan)
      return admit_outcome::admitted();  // the staged reservation is this step's
    if (options.refuse)
      return admit_outcome::refused(admit_runtime_error{key_ + " refuses"});
    std::vector<const segment*> writers;
    for (const segment& seg : step.segments)
      if (seg.span > 0)
        writers.push_back(&seg);
    if (writers.size() > free_.size()) {
      const segment& first_short = *writers[free_.size()];
      const auto short_by = static_cast<std::int64_t>(writers.size() - free_.size());
      return admit_outcome::refused(
          allocation_failed{key_ + " is short", short_by, first_short.label, first_short.rid});
    }
    for (const segment* seg : writers) {
      taken_.emplace_back(seg->rid, free_.back());
      free_.pop_back();
    }
    staged_ = ctx.is_preplan;
    return options.wait ? admit_outcome::waiting() : admit_outcome::admitted();
  }

  void rollback_admit(const resource_step&, step_context& ctx) override {
    note("rollback", ctx);
    give_back_taken();
  }

  result<std::shared_ptr<const plan_result>> plan(const resource_step&,
                                                  step_context& ctx) override {
    note("plan", ctx);
    if (options.fail_plan)
      return make_error(errc::out_of_range, "plan fails on purpose");
    auto out = std::make_shared<pool_plan>();
    for (const auto& taken : taken_)
      out->slots.push_back(taken.second);
    for (const std::string& dep : options.depends_on) {
      const auto found = ctx.plan_results.find(dep);
      if (found == ctx.plan_results.end())
        return make_error(errc::not_found, "no plan for " + dep);
      out->dependency_slots[dep] = dynamic_cast<const pool_plan&>(*found->second).slots;
    }
    return std::shared_ptr<const plan_result>(std::move(out));
  }

  result<void> commit(const resource_step&, step_context& ctx) override {
    note("commit", ctx);
    if (options.fail_commit)
      return make_error(errc::out_of_range, "commit fails on purpose");
    for (const auto& [rid, slot] : taken_)
      owned_[rid].push_back(slot);
    taken_.clear();
    staged_ = false;
    return {};
  }

  void clear_preplan() override {
    log_->push_back(key_ + ".clear_preplan");
    if (staged_)
      give_back_taken();
  }
  void ingest_request(const request_id& rid) override { log_->push_back(key_ + ".ingest " + rid); }
  void remove_request(const request_id& rid) override {
    log_->push_back(key_ + ".remove " + rid);
    release(rid);
  }
  void reset_request(const request_id& rid, bool free) override {
    log_->push_back(key_ + ".reset " + rid + (free ? " free" : ""));
    if (free)
      release(rid);
  }
  std::optional<std::int64_t> resolve_cached_prefix(const request_id&) override {
    return options.cached;
  }
  std::int64_t apply_cached_prefix(const request_id&, std::int64_t agreed) override {
    applied = agreed;
    return agreed;
  }

  const std::vector<int>& free_list() const { return free_; }

  /// Free, taken and owned slots together are every slot exactly once.
  void expect_conserved() const {
    std::vector<int> all = free_;
    for (const auto& taken : taken_)
      all.push_back(taken.second);
    for (const auto& [rid, slots] : owned_)
      all.insert(all.end(), slots.begin(), slots.end());
    std::sort(all.begin(), all.end());
    std::vector<int> expected(static_cast<std::size_t>(options.slots));
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected) << key_ << " lost or duplicated a slot";
  }

  pool_options options;
  std::optional<std::int64_t> applied;  // the agreed cached prefix, once told

 private:
  void note(const std::string& call, const step_context& ctx) {
    log_->push_back(key_ + "." + call + (ctx.is_preplan ? "(pre)" : ""));
  }
  void give_back_taken() {
    for (; !taken_.empty(); taken_.pop_back())
      free_.push_back(taken_.back().second);
    staged_ = false;
  }
  void release(const request_id& rid) {
    const auto found = owned_.find(rid);
    if (found == owned_.end())
      return;
    for (auto slot = found->second.rbegin(); slot != found->second.rend(); ++slot)
      free_.push_back(*slot);
    owned_.erase(found);
  }

  std::string key_;
  std::vector<std::string>* log_;
  std::vector<int> free_;  // a stack: back() is taken next
  std::vector<std::pair<request_id, int>> taken_;
  std::map<request_id, std::vector<int>> owned_;
  bool staged_ = false;  // taken_ was reserved by a pre-admit
};

/// One segment per span, for requests r0, r1, ...
inline std::shared_ptr<const resource_step> step_of(const std::vector<std::int64_t>& spans) {
  auto step = std::make_shared<resource_step>();
  for (std::size_t i = 0; i < spans.size(); ++i)
    step->segments.push_back(segment{'r' + std::to_string(i), "main", spans[i]});
  return step;
}

/// A runner over `resources`; throws when make() refuses them.
inline step_runner runner_of(std::vector<resource*> resources) {
  auto runner = step_runner::make(std::move(resources));
  if (!runner)
    throw std::runtime_error(runner.error().to_string());
  return std::move(runner).value();
}

/// The keys of `resources`, in order.
inline std::vector<std::string> keys_of(const std::vector<resource*>& resources) {
  std::vector<std::string> keys;
  for (const resource* r : resources)
    keys.push_back(r->key());
  return keys;
}

/// A call log, or a list of keys.
using strings = std::vector<std::string>;

}  // namespace mstar::resources::test_support
