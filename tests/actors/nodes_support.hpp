#pragma once

// Nodes of a deployment in one process, for the actor tests: each a runtime
// over a fixture model (any family) with its node actor, optionally a
// transfer agent of its own (UCX over loopback TCP), and the router.

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "actors/deployment.hpp"
#include "actors/node_actor.hpp"
#include "actors/runtime.hpp"
#include "actors/transfer_actor.hpp"
#include "models/load.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test {

using actors::deployment;
using actors::node_actor;
using actors::router_options;
using actors::runtime;
using actors::transfer_actor;

/// One process holding several nodes, each a runtime with its node actor.
class nodes_fixture {
 public:
  explicit nodes_fixture(std::string model) : model_(std::move(model)) {
    runtime::add_message_types(cfg_);
    cfg_.set("logger.verbosity", caf::atom("quiet"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
  }
  ~nodes_fixture() {
    dep_.reset();
    for (auto& rt : runtimes_)
      rt->stop();
    for (auto& t : transfers_)
      caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  }

  caf::actor_system& sys() { return *sys_; }

  /// A node; with `transfer`, it publishes and adopts pool state through a
  /// transfer agent of its own (UCX over loopback TCP).
  node_actor add(const std::string& name, const std::string& role,
                 engine::engine_config config = {}, bool transfer = false) {
    auto m = models::load_causal_lm(model_dir(model_));
    EXPECT_TRUE(m.has_value()) << m.error().message();
    auto rt = runtime::start_in(*sys_, std::move(*m), config);
    EXPECT_TRUE(rt.has_value()) << rt.error().message();
    auto parts = actors::node_parts_of(**rt, name, role);
    if (transfer) {
      auto [regions, keep] = (*rt)->pool_memory();
      actors::transfer_setup setup;
      setup.agent.name = name;
      setup.agent.ucx.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
      setup.regions = regions;
      setup.keep_alive = keep;
      auto t = actors::spawn_transfer_actor(*sys_, std::move(setup));
      EXPECT_TRUE(static_cast<bool>(t)) << sys_->render(t.error());
      parts.transfer = *t;
      caf::scoped_actor self{*sys_};
      self->request(parts.transfer, std::chrono::seconds(10), actors::describe_atom_v)
          .receive([&](const std::vector<std::string>& d) { parts.arenas = d; },
                   [&](caf::error& e) { ADD_FAILURE() << sys_->render(e); });
      transfers_.push_back(parts.transfer);
    }
    auto node = actors::spawn_node_actor(*sys_, std::move(parts));
    runtimes_.push_back(std::move(*rt));
    nodes_.push_back(node);
    return node;
  }

  deployment& dep(router_options options = {}) {
    if (!dep_) {
      dep_ = deployment::start_in(*sys_, options);
      for (const auto& n : nodes_) {
        auto joined = dep_->join(n, std::chrono::seconds(5));
        EXPECT_TRUE(joined.has_value()) << joined.error().message();
      }
    }
    return *dep_;
  }

  runtime& rt(std::size_t i) { return *runtimes_.at(i); }

  void expect_pools_empty() {
    for (auto& rt : runtimes_) {
      auto ok = rt->check_pools();
      EXPECT_TRUE(ok.has_value()) << ok.error().message();
      auto s = rt->stats();
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(s->running, 0);
      EXPECT_EQ(s->waiting, 0);
      EXPECT_EQ(s->free_slots, s->slots - (s->slots > 0 ? 1 : 0));
      EXPECT_EQ(s->kv_free_pages + s->kv_cached_pages, s->kv_pages - 1);
    }
  }

 private:
  std::string model_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::vector<std::unique_ptr<runtime>> runtimes_;
  std::vector<node_actor> nodes_;
  std::vector<transfer_actor> transfers_;
  std::unique_ptr<deployment> dep_;
};

}  // namespace mstar::test
