// A step's typed request and plans, a request and its deltas survive CAF's
// binary serializer: what a deployment's router and nodes send each other
// (a prompt's publication and adoption, end keys included).
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

TEST(serialization, a_request_and_its_deltas_round_trip_every_field) {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  engine::request_spec r;
  r.id = "req-7";
  r.prompt = {1, 2, 3};
  r.text = "héllo";
  r.sampling.temperature = 0.5F;
  r.sampling.top_k = 7;
  r.sampling.seed = 99;
  r.sampling.n = 2;
  r.sampling.logprobs = 3;
  r.stop.max_tokens = 40;
  r.stop.stop_strings = {"\n\n", "END"};
  r.stop.stop_token_ids = {5};
  r.generated = {11, 12};
  r.cache_salt = "tenant-a";
  r.keep_logits = true;
  models::image_input im;
  im.pixel_values = {0.5F, -1.25F, 3.0F};
  im.t = 1;
  im.h = 2;
  im.w = 4;
  r.images = {im, im};
  r.images[1].pixel_values.push_back(-0.0F);
  const auto rb = round_trip(sys, r);
  EXPECT_EQ(rb.id, r.id);
  EXPECT_EQ(rb.prompt, r.prompt);
  EXPECT_EQ(rb.text, r.text);
  EXPECT_EQ(rb.sampling.temperature, 0.5F);
  EXPECT_EQ(rb.sampling.top_k, 7);
  EXPECT_EQ(rb.sampling.seed, 99U);
  EXPECT_EQ(rb.sampling.n, 2);
  EXPECT_EQ(rb.sampling.logprobs, 3);
  EXPECT_EQ(rb.stop.max_tokens, 40);
  EXPECT_EQ(rb.stop.stop_strings, r.stop.stop_strings);
  EXPECT_EQ(rb.stop.stop_token_ids, r.stop.stop_token_ids);
  EXPECT_EQ(rb.generated, r.generated);
  EXPECT_EQ(rb.cache_salt, r.cache_salt);
  EXPECT_TRUE(rb.keep_logits);
  ASSERT_EQ(rb.images.size(), 2U);
  EXPECT_EQ(rb.images[0].pixel_values, im.pixel_values);
  EXPECT_EQ(rb.images[1].pixel_values.size(), 4U);
  EXPECT_EQ(rb.images[1].t, 1);
  EXPECT_EQ(rb.images[1].h, 2);
  EXPECT_EQ(rb.images[1].w, 4);
  r.text.reset();
  EXPECT_FALSE(round_trip(sys, r).text.has_value());

  engine::delta d;
  d.id = "req-7";
  d.index = 1;
  d.tokens = {4, 5};
  d.text = "ab";
  d.chosen_logprobs = {{4, -0.5F}, {5, -1.5F}};
  d.top_logprobs = {{{4, -0.5F}, {6, -2.0F}}, {{5, -1.5F}}};
  d.logits = {{0.25F, 1.0F}};
  d.counts = {3, 2, 1};
  d.time_to_first_token_s = 0.125;
  for (const auto reason : {engine::finish_reason::length, engine::finish_reason::error}) {
    d.finished = reason;
    d.error = reason == engine::finish_reason::error ? "boom" : "";
    const auto db = round_trip(sys, d);
    EXPECT_EQ(db.id, d.id);
    EXPECT_EQ(db.index, 1);
    EXPECT_EQ(db.tokens, d.tokens);
    EXPECT_EQ(db.text, d.text);
    ASSERT_EQ(db.chosen_logprobs.size(), 2U);
    EXPECT_EQ(db.chosen_logprobs[1].id, 5U);
    ASSERT_EQ(db.top_logprobs.size(), 2U);
    EXPECT_EQ(db.top_logprobs[0][1].logprob, -2.0F);
    EXPECT_EQ(db.logits, d.logits);
    EXPECT_EQ(db.finished, reason);
    EXPECT_EQ(db.error, d.error);
    EXPECT_EQ(db.counts.completion_tokens, 2);
    EXPECT_EQ(db.time_to_first_token_s, 0.125);
  }
  d.finished.reset();
  EXPECT_FALSE(round_trip(sys, d).finished.has_value());
}

TEST(serialization, a_publication_and_its_adoption_round_trip_with_end_keys) {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  resources::digest256 key{};
  key[0] = 0xab;
  key[31] = 0x01;
  engine::publication pub;
  auto& part = pub.streams["main"];
  part.kv.emplace();
  part.kv->stored_len = 24;
  part.kv->page_size = 4;
  part.kv->pages = {3, 4, 5, 6, 7, 8};
  part.kv->page_keys = {key, key};
  part.kv->chain = resources::kv_key_chain{{key}, 1, {7, 8}};
  part.kv->ends = {{11, key, 9}};
  part.recurrent = resources::recurrent_export{2, true, 1, 4096, {{key, 7}}};
  const auto pub_back = round_trip(sys, pub);
  EXPECT_EQ(pub_back, pub);
  ASSERT_EQ(pub_back.streams.at("main").kv->ends.size(), 1U);
  EXPECT_EQ(pub_back.streams.at("main").kv->ends[0].key, key);

  engine::adoption adopted;
  auto& taken = adopted.streams["main"];
  taken.kv = resources::kv_import{{10, 11}, {{10, 3}, {11, 4}}, 0, {{12, 9}}};
  taken.recurrent = resources::recurrent_import{1, 2, {{6, 7}}};
  EXPECT_EQ(round_trip(sys, adopted), adopted);
}

}  // namespace
}  // namespace mstar::actors
