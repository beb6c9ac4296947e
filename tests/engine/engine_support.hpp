#pragma once

// Helpers of the engine tests: fixture models behind a local engine, greedy
// requests, and the pools' conservation check.

#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "engine/local_engine.hpp"
#include "models/load.hpp"
#include "models/nemotron_h.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test {

/// A local engine over fixture model `name` on the CPU.
inline std::unique_ptr<engine::local_engine> fixture_engine(const std::string& name,
                                                            engine::engine_config config = {}) {
  auto model = models::load_causal_lm(model_dir(name));
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  auto e = engine::local_engine::make(std::move(*model), config);
  EXPECT_TRUE(e.has_value()) << e.error().message();
  return e ? std::move(*e) : nullptr;
}

/// A greedy request for `prompt` that ignores eos and makes `tokens` tokens.
inline engine::request_spec greedy_request(std::vector<engine::token_id> prompt,
                                           std::int32_t tokens, bool keep_logits = false) {
  engine::request_spec r;
  r.prompt = std::move(prompt);
  r.stop.max_tokens = tokens;
  r.stop.ignore_eos = true;
  r.keep_logits = keep_logits;
  return r;
}

/// Fails the test when a pool's conservation invariant is broken.
inline void expect_pools_whole(engine::local_engine& e) {
  auto ok = e.pools().check_invariants();
  EXPECT_TRUE(ok.has_value()) << ok.error().message();
}

/// Fails the test unless the pools hold nothing for requests: every slot
/// free, every page free or cached.
inline void expect_pools_empty(engine::local_engine& e) {
  expect_pools_whole(e);
  const auto s = e.pools().stats();
  EXPECT_EQ(s.free_slots, s.slots == 0 ? 0 : s.slots - 1) << "slots still held";  // the sink
  if (s.kv_pages > 0) {
    EXPECT_EQ(s.kv_free_pages + s.kv_cached_pages, s.kv_pages - 1) << "pages still held";
  }
}

}  // namespace mstar::test
