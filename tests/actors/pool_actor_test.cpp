// The pool actor's protocol under CAF's deterministic test coordinator: no
// threads, every message delivered when the test runs the scheduler. A
// scoped actor sends, the coordinator runs the pool, the reply is read.
#include "actors/pool_actor.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include "actors/runtime.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::actors {
namespace {

struct deterministic {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;

  deterministic() {
    runtime::add_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }

  // Sends `xs` to `dest`, runs every queued job, returns the one reply.
  template <class Reply, class Handle, class... Ts>
  Reply ask(Handle dest, Ts... xs) {
    caf::scoped_actor self{*sys};
    self->send(dest, xs...);
    sched->run();
    std::optional<Reply> out;
    self->receive([&](Reply& r) { out = std::move(r); },
                  [&](caf::error& e) { ADD_FAILURE() << sys->render(e); },
                  caf::after(std::chrono::seconds(5)) >> [&] { ADD_FAILURE() << "no reply"; });
    return out ? std::move(*out) : Reply{};
  }

  // An admit's two-part reply: the answer and, when admitted, the plans.
  std::pair<admit_reply, plans_ptr> admit(const pool_actor& dest, const step_ptr& step) {
    caf::scoped_actor self{*sys};
    self->send(dest, admit_atom_v, step);
    sched->run();
    std::pair<admit_reply, plans_ptr> out;
    self->receive(
        [&](admit_reply& r, plans_ptr& p) {
          out = {std::move(r), std::move(p)};
        },
        [&](caf::error& e) { ADD_FAILURE() << sys->render(e); },
        caf::after(std::chrono::seconds(5)) >> [&] { ADD_FAILURE() << "no reply"; });
    return out;
  }
};

// A recurrent-only pool set of the hybrid fixture with `slots` slots.
std::shared_ptr<engine::pool_set> recurrent_pool(std::int64_t slots) {
  auto model = models::nemotron_h_model::load(test::model_dir("nemotron_h_tiny_hybrid")).value();
  models::pool_options o;
  o.max_slots = slots;
  o.checkpoint_slots = 0;  // no prefix-reuse checkpoints: the pool keeps no cache
  auto spec = model->pools(o).value();
  return std::shared_ptr<engine::pool_set>{
      engine::pool_set::make(spec, engine::pool_kinds::recurrent_only).value()};
}

step_ptr step_of(const models::causal_lm& model, std::vector<std::string> rids) {
  auto p = std::make_shared<step_payload>();
  for (auto& rid : rids)
    p->step.rows.push_back({rid, {5}, true, std::nullopt});
  for (const auto& r : p->step.rows)
    p->rows.push_back({r.rid, r.tokens});
  p->request = model.declare(p->rows);
  return p;
}

TEST(pool_actor, admits_plans_commits_and_refuses_a_full_pool_leaving_it_whole) {
  deterministic d;
  auto set = recurrent_pool(3);  // the sink and two slots
  auto model = models::nemotron_h_model::load(test::model_dir("nemotron_h_tiny_hybrid")).value();
  auto pool = spawn_pool_actor(*d.sys, set, nullptr);
  d.sched->run();
  for (const auto* rid : {"a", "b", "c"}) {
    EXPECT_EQ(d.ask<std::int64_t>(pool, register_atom_v, std::string{rid},
                                  std::vector<std::uint32_t>{5}, std::string{}, seed_ptr{}),
              -1)
        << "a recurrent pool keeps no prefix cache";
  }
  auto two = step_of(*model, {"a", "b"});
  auto [reply, plans] = d.admit(pool, two);
  EXPECT_TRUE(reply.ok);
  ASSERT_NE(plans, nullptr);
  ASSERT_NE(plans->recurrent, nullptr);
  EXPECT_EQ(plans->kv, nullptr);
  EXPECT_EQ(plans->recurrent->addressing("main").value()->slot_indices.size(), 2U);
  EXPECT_TRUE(d.ask<bool>(pool, commit_atom_v));
  EXPECT_EQ(d.ask<std::string>(pool, check_atom_v), "");
  // A third request finds no slot: refused, nothing taken.
  const auto before = d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots;
  auto three = step_of(*model, {"a", "b", "c"});
  const auto [refused, no_plans] = d.admit(pool, three);
  EXPECT_EQ(no_plans, nullptr);
  EXPECT_FALSE(refused.ok);
  EXPECT_EQ(refused.refused_by, "recurrent");
  EXPECT_FALSE(refused.why.empty());
  EXPECT_EQ(d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots, before);
  EXPECT_EQ(d.ask<std::string>(pool, check_atom_v), "");
  // Releasing frees the slots.
  caf::anon_send(pool, release_atom_v, std::vector<std::string>{"a", "b", "c"});
  d.sched->run();
  EXPECT_EQ(d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots, 2);
  EXPECT_EQ(d.ask<std::string>(pool, check_atom_v), "");
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  d.sched->run();
}

TEST(pool_actor, rollback_after_admit_returns_exactly_what_the_step_took) {
  deterministic d;
  auto set = recurrent_pool(4);
  auto model = models::nemotron_h_model::load(test::model_dir("nemotron_h_tiny_hybrid")).value();
  auto pool = spawn_pool_actor(*d.sys, set, nullptr);
  d.sched->run();
  const auto free = d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots;
  auto step = step_of(*model, {"x", "y"});
  EXPECT_TRUE(d.admit(pool, step).first.ok);
  EXPECT_EQ(d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots, free - 2);
  EXPECT_TRUE(d.ask<bool>(pool, rollback_atom_v));
  EXPECT_EQ(d.ask<pool_stats_reply>(pool, stats_atom_v).stats.free_slots, free);
  EXPECT_EQ(d.ask<std::string>(pool, check_atom_v), "");
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  d.sched->run();
}

}  // namespace
}  // namespace mstar::actors
