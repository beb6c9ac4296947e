// A step's typed request and plans survive CAF's binary serializer: what the
// disaggregation issue sends between nodes.
#include "actors/serialization.hpp"

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

#include "actors/runtime.hpp"

namespace mstar::actors {
namespace {

template <class T>
T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  EXPECT_FALSE(sink(x));
  T y{};
  caf::binary_deserializer source{sys, buf};
  EXPECT_FALSE(source(y));
  return y;
}

TEST(serialization, a_step_request_round_trips_with_forks_and_retention) {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  models::step_request req;
  req.kv.emplace();
  req.kv->segments = {{"a", "main", 3}, {"b", "draft", 1}};
  req.kv->pre_forks = {{"main", "draft"}};
  req.kv->fork_rids = std::vector<resources::request_id>{"a"};
  req.kv->retention[{"a", "main"}] = resources::retention_policy::make(64, 8).value();
  const auto back = round_trip(sys, req);
  ASSERT_TRUE(back.kv.has_value());
  EXPECT_FALSE(back.recurrent.has_value());
  EXPECT_EQ(back.kv->segments, req.kv->segments);
  EXPECT_EQ(back.kv->pre_forks, req.kv->pre_forks);
  EXPECT_EQ(back.kv->fork_rids, req.kv->fork_rids);
  EXPECT_EQ(back.kv->retention, req.kv->retention);
}

TEST(serialization, plans_round_trip_without_node_local_pointers) {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  resources::kv_plan kv;
  auto& l = kv.labels["main"];
  l.rows = {0, 1};
  l.qo_indptr = {0, 1, 2};
  l.kv_indptr = {0, 2, 3};
  l.kv_indices = {4, 5, 9};
  l.last_page_len = {3, 1};
  l.decode = true;
  l.decode_page = {5, 9};
  l.decode_offset = {2, 0};
  const auto kv_back = round_trip(sys, kv);
  EXPECT_EQ(kv_back.labels.at("main").kv_indices, l.kv_indices);
  EXPECT_EQ(kv_back.labels.at("main").decode_offset, l.decode_offset);
  EXPECT_TRUE(kv_back.labels.at("main").decode);
  resources::recurrent_plan rec;
  auto& a = rec.labels["main"];
  a.slot_indices = {3, 1};
  a.has_state = {1, 0};
  a.num_rows = 2;
  const std::int32_t graph_slots[] = {3, 1};
  a.graph_slot_indices = graph_slots;
  const auto rec_back = round_trip(sys, rec);
  EXPECT_EQ(rec_back.labels.at("main").slot_indices, a.slot_indices);
  EXPECT_EQ(rec_back.labels.at("main").has_state, a.has_state);
  EXPECT_EQ(rec_back.labels.at("main").num_rows, 2);
  EXPECT_EQ(rec_back.labels.at("main").graph_slot_indices, nullptr);
}

}  // namespace
}  // namespace mstar::actors
