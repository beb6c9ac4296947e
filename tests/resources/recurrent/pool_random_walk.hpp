#pragma once

// A seeded random walk over a KV pool and a recurrent state pool under two
// step runners (either pool admitted first) and a refuser refusing at random:
// steps with padding rows, forks, fork rows, graph leases, pre-plans (some
// overlapping the running step), aborts, resets and removals. A shadow of
// every recurrent slot (its byte pattern, has_state, generation) is checked
// after every operation, with both pools' invariants.
#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "resources/step/step_runner.hpp"
#include "tests/resources/recurrent/pool_fixture.hpp"
#include "tests/resources/recurrent/pool_walk_model.hpp"

namespace mstar::resources::test {

using namespace mstar::resources::test::walk;

class recurrent_walk : public ::testing::Test {
 protected:
  /// `memory` makes both pools' arenas (host memory when empty).
  void start(std::uint32_t seed, const kernels::arena_factory& memory = {}) {
    rng_.seed(seed);
    kv_pool_config kc;
    kc.geometry.page_size = 4;
    kc.max_num_pages = 28;
    kc.geometry.num_layers = 1;
    kc.geometry.head_dim = 4;
    kc.geometry.dtype = dtype::float32;
    kv_ = kv_pool::make("kv", kc, "walk-model", memory).value();
    rec_ = recurrent_state_pool::make("rec", config_of(rec_slots, true, tiny_blocks()), memory)
               .value();
    rec_->build_accelerator_graph_buffers(2, 8, 64);
    runners_.clear();
    runners_.push_back(step_runner::make({&refuser_, rec_.get(), kv_.get()}).value());
    runners_.push_back(step_runner::make({&refuser_, kv_.get(), rec_.get()}).value());
  }

  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  step_runner& runner() { return runners_[static_cast<std::size_t>(pick(0, 1))]; }

  // Holders the shadow lacks join it fresh (zero, no state, generation 0).
  void add_new_holders(std::set<key>* added) {
    for (const auto& rid : rids_) {
      for (const auto& label : labels) {
        if (rec_->slot_of(rid, label) && !shadow_.contains({rid, label})) {
          shadow_[{rid, label}] = {};
          if (added != nullptr)
            added->insert({rid, label});
        }
      }
    }
  }
  // Shadow entries whose slot went back must be among `allowed`.
  void drop_released(const std::set<key>& allowed) {
    for (auto it = shadow_.begin(); it != shadow_.end();) {
      if (rec_->slot_of(it->first.first, it->first.second)) {
        ++it;
        continue;
      }
      EXPECT_TRUE(allowed.contains(it->first))
          << it->first.first << "/" << it->first.second << " lost its slot";
      it = shadow_.erase(it);
    }
  }

  void verify() {
    const auto kv_ok = kv_->check_invariants();
    ASSERT_TRUE(kv_ok.has_value()) << kv_ok.error().message();
    const auto rec_ok = rec_->check_invariants();
    ASSERT_TRUE(rec_ok.has_value()) << rec_ok.error().message();
    for (const auto& pad : pads)
      ASSERT_FALSE(rec_->slot_of(pad)) << pad;
    std::size_t held = 0;
    for (const auto& rid : rids_) {
      for (const auto& label : labels) {
        const auto slot = rec_->slot_of(rid, label);
        const auto it = shadow_.find({rid, label});
        ASSERT_EQ(slot.has_value(), it != shadow_.end()) << rid << "/" << label;
        if (!slot)
          continue;
        ++held;
        ASSERT_TRUE(slot_holds(*rec_, *slot, it->second.seed)) << rid << "/" << label;
        ASSERT_EQ(rec_->has_state(rid, label), it->second.has_state) << rid << "/" << label;
        ASSERT_EQ(rec_->generation(rid, label), it->second.generation) << rid << "/" << label;
      }
    }
    ASSERT_EQ(held + static_cast<std::size_t>(rec_->num_free_slots()) + 1,
              static_cast<std::size_t>(rec_slots));
  }

  // What the plan must address, from the shadow with the pre-forks applied.
  void expect_addressing(const walk_step& s, const recurrent_plan& plan) {
    shadow_map after = shadow_;
    fork_shadow(s, s.rec->pre_forks, after);
    std::map<std::string, std::pair<std::vector<std::int32_t>, std::vector<std::uint8_t>>> want;
    for (const segment& seg : s.rec->segments) {
      auto& [idx, hs] = want[seg.label];
      const auto slot = addressed(s, seg) ? rec_->slot_of(seg.rid, seg.label) : std::nullopt;
      ASSERT_EQ(slot.has_value(), addressed(s, seg)) << seg.rid << "/" << seg.label;
      idx.push_back(slot.value_or(recurrent_state_pool::sink_slot));
      hs.push_back(slot && after[{seg.rid, seg.label}].has_state ? 1 : 0);
    }
    ASSERT_EQ(plan.labels.size(), want.size());
    for (auto& [label, rows] : want) {
      const recurrent_addressing& a = *plan.addressing(label).value();
      ASSERT_EQ(a.num_rows, static_cast<std::int32_t>(rows.first.size()));
      if (s.ctx.lease) {
        rows.first.resize(8, 0);
        rows.second.resize(8, 0);
        ASSERT_EQ(std::vector<std::int32_t>(a.graph_slot_indices, a.graph_slot_indices + 8),
                  rows.first);
      }
      ASSERT_EQ(a.slot_indices, rows.first) << label;
      ASSERT_EQ(a.has_state, rows.second) << label;
      std::set<std::int32_t> distinct;
      for (const auto i : a.slot_indices)
        ASSERT_TRUE(i == recurrent_state_pool::sink_slot || distinct.insert(i).second);
    }
  }

  // Pre-admits and pre-plans `s` through a runner, or on the recurrent pool
  // alone; false (nothing staged) when refused.
  bool stage(walk_step& s, bool rec_only) {
    stage_free_ = rec_->free_list();
    bool admitted = false;
    if (rec_only) {
      s.ctx.is_preplan = true;
      admitted = rec_->admit(*s.rec, s.ctx).ok;
      if (!admitted)
        rec_->rollback_admit(*s.rec, s.ctx);  // what the runner does
      s.ctx.is_preplan = false;
    } else {
      admitted = runner().pre_admit(s.bundle, s.ctx).ok();
    }
    if (!admitted) {
      EXPECT_EQ(rec_->free_list(), *stage_free_);
      verify();
      return false;
    }
    add_new_holders(&staged_fresh_);
    if (rec_only) {
      s.ctx.is_preplan = true;
      auto planned = rec_->plan(*s.rec, s.ctx);
      s.ctx.is_preplan = false;
      EXPECT_TRUE(planned);
      staged_plan_ = std::dynamic_pointer_cast<const recurrent_plan>(planned.value());
    } else {
      EXPECT_TRUE(runner().pre_plan(s.bundle, s.ctx));
      staged_plan_ = plan_in(s.ctx);
    }
    expect_addressing(s, *staged_plan_);
    verify();  // staging copied and marked nothing
    return true;
  }

  void drop_stage() {
    runner().clear_preplan();
    drop_released(staged_fresh_);
    staged_fresh_.clear();
    staged_plan_.reset();
    pending_.reset();
    verify();
  }

  void step_op() {
    walk_step s = pending_ ? std::move(*pending_) : random_step(rng_, rids_);
    pending_.reset();
    SCOPED_TRACE(describe(s));
    bool staged = staged_plan_ != nullptr;
    if (!staged && coin(0.25))
      staged = stage(s, /*rec_only=*/false);
    if (staged && coin(0.15)) {
      drop_stage();
      if (stage_free_) {
        EXPECT_EQ(rec_->free_list(), *stage_free_);
      }
      staged = false;
    }
    const auto rec_free = rec_->free_list();
    const auto kv_free = kv_->pages().free_list();
    refuser_.refuse = coin(0.1);
    const auto out = runner().admit(s.bundle, s.ctx);
    refuser_.refuse = false;
    if (!out.ok()) {
      ++counts_["refused by " + out.failed_resource];
      if (staged) {
        // The pool unwound its stage if the refused admit reached it; a
        // pool the refusal came before still holds one, for a step that
        // will not run.
        drop_stage();
        if (stage_free_) {
          EXPECT_EQ(rec_->free_list(), *stage_free_);
        }
      } else {
        EXPECT_EQ(rec_->free_list(), rec_free);
        EXPECT_EQ(kv_->pages().free_list(), kv_free);
      }
      verify();
      return;
    }
    std::set<key> fresh = staged_fresh_;
    staged_fresh_.clear();
    add_new_holders(&fresh);
    verify();
    ASSERT_TRUE(runner().plan(s.bundle, s.ctx));
    const auto plan = plan_in(s.ctx);
    if (staged) {
      EXPECT_EQ(plan.get(), staged_plan_.get());
      ++counts_["promoted"];
    }
    if (!s.rec->pre_forks.empty() || !s.rec->post_forks.empty())
      ++counts_["forking steps"];
    staged_plan_.reset();
    expect_addressing(s, *plan);
    fork_shadow(s, s.rec->pre_forks, shadow_);
    verify();
    for (const segment& seg : s.rec->segments) {  // the forward
      if (!addressed(s, seg))
        continue;
      const auto seed = next_seed_++;
      fill_slot(*rec_, rec_->slot_of(seg.rid, seg.label).value(), seed);
      shadow_[{seg.rid, seg.label}].seed = seed;
    }
    // A stage made before this step commits addresses has_state as it was
    // (the engine stages after commit_done); it must leave this step's
    // slots alone when cleared, which is all it is used for here. On the
    // recurrent pool alone: the KV pool's refused pre-admit would unwind the
    // running step's pages.
    const bool early = coin(0.1) && stage_next(/*rec_only=*/true);
    if (coin(0.1)) {
      // The recurrent pool's share failed after its forward wrote: unwind
      // it (§1.13: freed slots are zeroed). The KV pool's protocol has no
      // rollback after plan, so its share commits.
      rec_->rollback_admit(*s.rec, s.ctx);
      ++counts_["aborted"];
      ASSERT_TRUE(kv_->commit(*s.bundle.at("kv"), s.ctx));
      drop_released(fresh);
      stage_free_.reset();
      if (pending_)
        drop_stage();
      verify();
      return;
    }
    ASSERT_TRUE(runner().commit(s.bundle, s.ctx));
    for (const segment& seg : s.rec->segments) {
      if (addressed(s, seg))
        shadow_[{seg.rid, seg.label}].has_state = true;
    }
    fork_shadow(s, s.rec->post_forks, shadow_);
    verify();
    if (early) {
      ++counts_["early stages"];
      drop_stage();
      EXPECT_EQ(rec_->free_list(), *stage_free_);
    } else if (coin(0.2)) {
      stage_next(
          /*rec_only=*/false);  // the pipeline: stage N+1 once N committed, while N's kernels run
    }
  }

  bool stage_next(bool rec_only) {
    pending_ = random_step(rng_, rids_);
    if (!stage(*pending_, rec_only))
      pending_.reset();
    return pending_.has_value();
  }

  void lifecycle_op() {
    if (pending_ || staged_plan_)
      drop_stage();
    const int op = pick(0, 9);
    if (op < 4 || rids_.empty()) {
      if (rids_.size() >= 6)
        return;
      rids_.push_back('r' + std::to_string(next_rid_++));
      runner().ingest_request(rids_.back());
      runner().ingest_request(rids_.back());  // idempotent
      verify();
      return;
    }
    const auto at = rids_.begin() + pick(0, static_cast<int>(rids_.size()) - 1);
    const request_id rid = *at;
    std::set<key> own{{rid, "main"}, {rid, "draft"}};
    if (op < 7) {
      runner().remove_request(rid);
      drop_released(own);
      rids_.erase(at);
    } else if (op < 9) {
      runner().reset_request(rid, true);
      drop_released(own);
    } else {
      runner().reset_request(rid, false);
      for (auto& [k, slot] : shadow_) {
        if (k.first == rid)
          slot = {std::nullopt, false, slot.generation};
      }
    }
    verify();
  }

  /// The walk: `ops` operations per seed, checking everything after each.
  void run(std::initializer_list<std::uint32_t> seeds, int ops, int min_steps, int min_count,
           const kernels::arena_factory& memory = {}) {
    for (const std::uint32_t seed : seeds) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      start(seed, memory);
      rids_.clear();
      shadow_.clear();
      int steps = 0;
      for (int op = 0; op < ops && !HasFatalFailure(); ++op) {
        SCOPED_TRACE("op " + std::to_string(op));
        if (!rids_.empty() && (pending_ || coin(0.7))) {
          step_op();
          ++steps;
        } else {
          lifecycle_op();
        }
      }
      EXPECT_GT(steps, min_steps);
      for (const auto* what : {"refused by rec", "refused by kv", "refused by refuser", "promoted",
                               "forking steps", "aborted", "early stages"})
        EXPECT_GT(counts_[what], min_count) << what;
      counts_.clear();
      if (HasFailure())
        return;
    }
  }

  std::mt19937 rng_;
  std::unique_ptr<kv_pool> kv_;
  std::unique_ptr<recurrent_state_pool> rec_;
  refusing_resource refuser_{"refuser", {"kv", "rec"}};
  std::vector<step_runner> runners_;
  std::vector<request_id> rids_;
  shadow_map shadow_;
  std::optional<walk_step> pending_;  // staged while the previous step ran
  std::shared_ptr<const recurrent_plan> staged_plan_;
  std::set<key> staged_fresh_;
  std::optional<std::vector<std::int32_t>> stage_free_;
  std::map<std::string, int> counts_;  // what the walk exercised
  std::uint32_t next_seed_ = 1;
  int next_rid_ = 0;
};

}  // namespace mstar::resources::test
