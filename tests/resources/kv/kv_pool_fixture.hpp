#pragma once

// Shared fixture of the KV pool tests: a small pool, a step driver that
// checks conservation after every call, and prompt/key helpers.
#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>

#include "resources/kv/kv_pool.hpp"

namespace mstar::resources::test {

inline kv_pool_config small_config(std::int32_t ps = 8, std::int64_t pages = 64) {
  kv_pool_config c;
  c.geometry.page_size = ps;
  c.max_num_pages = pages;
  c.geometry.num_layers = 2;
  c.geometry.num_kv_heads = 1;
  c.geometry.head_dim = 4;
  c.geometry.dtype = dtype::float32;
  return c;
}

class kv_pool_test : public ::testing::Test {
 protected:
  void make(kv_pool_config c = small_config(), std::string model = "test-model") {
    pool_ = kv_pool::make("kv", c, std::move(model)).value();
  }
  void SetUp() override { make(); }

  void check() {
    auto ok = pool_->check_invariants();
    ASSERT_TRUE(ok.has_value()) << ok.error().message();
  }

  admit_outcome run(kv_step step, step_context ctx = {}) {
    auto out = pool_->admit(step, ctx);
    check();
    if (!out.ok) {
      pool_->rollback_admit(step, ctx);
      check();
      return out;
    }
    auto plan = pool_->plan(step, ctx);
    EXPECT_TRUE(plan.has_value());
    if (plan)
      last_plan_ = std::static_pointer_cast<const kv_plan>(*plan);
    auto committed = pool_->commit(step, ctx);
    EXPECT_TRUE(committed.has_value()) << committed.error().message();
    check();
    return out;
  }

  static kv_step step_of(std::vector<segment> segs, bool commit = true) {
    kv_step s;
    s.segments = std::move(segs);
    s.commit = commit;
    return s;
  }

  kv_stream_info info(const std::string& rid, const std::string& label = "main") {
    return pool_->stream(rid, label).value();
  }

  std::unique_ptr<kv_pool> pool_;
  std::shared_ptr<const kv_plan> last_plan_;
};

inline std::vector<token_id> prompt(std::size_t n, token_id diverge_at = 1u << 30) {
  std::vector<token_id> ids(n);
  for (std::size_t i = 0; i < n; ++i)
    ids[i] = i >= diverge_at ? 9000 + i : 100 + i;
  return ids;
}

inline kv_prefix_seed seed_for(const std::vector<token_id>& ids, std::int64_t ps) {
  std::vector<std::vector<token_id>> pages;
  for (std::size_t i = 0; i < ids.size(); i += static_cast<std::size_t>(ps)) {
    pages.emplace_back(ids.begin() + static_cast<long>(i),
                       ids.begin() + static_cast<long>(std::min(ids.size(), i + ps)));
  }
  kv_prefix_seed seed;
  seed.keys = chain(pages).value();
  if (ids.size() % static_cast<std::size_t>(ps) != 0)
    seed.tail = pages.back();
  return seed;
}

class kv_prefix_test : public kv_pool_test {
 protected:
  void SetUp() override { make(small_config(16, 64)); }

  // Ingests, probes, admits the rest of the prompt and commits: a request's
  // prefill as the worker runs it. Returns the probe's answer.
  std::int64_t serve(const std::string& rid, const std::vector<token_id>& ids,
                     bool prefix_cache = true) {
    pool_->ingest_request(rid, {{"main", seed_for(ids, 16)}}, prefix_cache);
    const auto hit = pool_->resolve_cached_prefix(rid).value_or(0);
    check();
    EXPECT_TRUE(run(step_of({{rid, "main", static_cast<std::int64_t>(ids.size()) - hit}})).ok);
    return hit;
  }
};

}  // namespace mstar::resources::test
