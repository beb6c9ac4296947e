#pragma once

// Reading a request_handle in the actor tests (runtime and deployment).

#include <chrono>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "actors/runtime.hpp"

namespace mstar::test {

/// Every delta of a handle, each wait bounded by `deadline`.
inline std::vector<engine::delta> read_all(
    actors::request_handle& h, std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  std::vector<engine::delta> out;
  while (!h.done()) {
    auto d = h.next_for(deadline);
    if (!d) {
      ADD_FAILURE() << "no delta for " << h.id() << " within the deadline";
      break;
    }
    out.push_back(std::move(*d));
  }
  return out;
}

/// The token ids of `ds`, in order.
inline std::vector<engine::token_id> tokens_of(const std::vector<engine::delta>& ds) {
  std::vector<engine::token_id> out;
  for (const auto& d : ds)
    out.insert(out.end(), d.tokens.begin(), d.tokens.end());
  return out;
}

/// Each of `specs` submitted to `rt` by one of `threads` threads (request i
/// by thread i % threads, in order), read to its end: each request's tokens.
inline std::vector<std::vector<engine::token_id>> tokens_from_threads(
    actors::runtime& rt, const std::vector<engine::request_spec>& specs, std::size_t threads) {
  std::vector<std::vector<engine::token_id>> got(specs.size());
  std::vector<std::thread> running;
  for (std::size_t t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (std::size_t i = t; i < specs.size(); i += threads) {
        auto h = rt.submit(specs[i]);
        got[i] = tokens_of(read_all(h));
      }
    });
  }
  for (auto& th : running)
    th.join();
  return got;
}

/// The runtime's pools hold nothing but what they keep for themselves (one
/// slot, one page): `check_pools` passes, cached pages aside every page is
/// free, and no request runs or waits.
inline void expect_pools_empty(actors::runtime& rt) {
  auto ok = rt.check_pools();
  EXPECT_TRUE(ok.has_value()) << ok.error().message();
  auto s = rt.stats();
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->free_slots, s->slots - 1);
  EXPECT_EQ(s->kv_free_pages + s->kv_cached_pages, s->kv_pages - 1);
  EXPECT_EQ(s->running, 0);
  EXPECT_EQ(s->waiting, 0);
}

}  // namespace mstar::test
