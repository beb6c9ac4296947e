#pragma once

// The random walk's model of a step and of the recurrent pool's slots: how
// steps are drawn, and what a slot must hold after each call (its byte
// pattern, has_state and generation), forks applied as the pool applies
// them. Test code only.
#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources::test::walk {

/// A (request, label) stream.
using key = std::pair<request_id, std::string>;

/// What one held slot must read like.
struct shadow_slot {
  std::optional<std::uint32_t> seed;  // nullopt: zeros
  bool has_state = false;
  std::uint64_t generation = 0;
};
/// Every held slot's expected contents.
using shadow_map = std::map<key, shadow_slot>;

/// One step for the recurrent pool, the KV pool and the refuser.
struct walk_step {
  std::shared_ptr<recurrent_step> rec;
  step_bundle bundle;
  step_context ctx;
};

/// The labels walk steps use.
inline const std::vector<std::string> labels{"main", "draft"};
/// The padding rows walk steps may carry.
inline const std::vector<std::string> pads{"pad0", "pad1"};
/// Slots of the walk's recurrent pool.
inline constexpr std::int64_t rec_slots = 9;  // the sink and 8 usable: full now and then

/// Whether a segment is written (and so holds a slot).
inline bool addressed(const walk_step& s, const segment& seg) {
  return seg.span > 0 && !s.ctx.is_padding_row(seg.rid);
}
/// Whether the step's forks run for row `row`: the first row of a fork request.
inline bool forks_apply(const walk_step& s, std::size_t row) {
  const request_id& rid = s.rec->segments[row].rid;
  const auto& segs = s.rec->segments;
  if (s.ctx.is_padding_row(rid) ||
      std::any_of(segs.begin(), segs.begin() + static_cast<std::ptrdiff_t>(row),
                  [&](const segment& x) { return x.rid == rid; }))
    return false;
  return !s.rec->fork_rids || std::count(s.rec->fork_rids->begin(), s.rec->fork_rids->end(), rid);
}
/// Applies `forks` to the shadow as the pool copies them.
inline void fork_shadow(const walk_step& s, const std::vector<fork>& forks, shadow_map& sh) {
  for (std::size_t i = 0; i < s.rec->segments.size(); ++i) {
    if (!forks_apply(s, i))
      continue;
    for (const auto& [from, to] : forks) {
      const request_id& rid = s.rec->segments[i].rid;
      if (!sh.contains({rid, from}))
        continue;
      ASSERT_TRUE(sh.contains({rid, to})) << rid << "/" << to << " was not reserved";
      shadow_slot& dst = sh[{rid, to}];
      dst.seed = sh[{rid, from}].seed;
      dst.has_state = sh[{rid, from}].has_state;
      ++dst.generation;
    }
  }
}

/// The step, for failure messages.
inline std::string describe(const walk_step& s) {
  std::string out = "step";
  for (const segment& seg : s.rec->segments)
    out += " " + seg.rid + "/" + seg.label + ":" + std::to_string(seg.span);
  for (const auto& [from, to] : s.rec->pre_forks)
    out += " pre " + from + "->" + to;
  for (const auto& [from, to] : s.rec->post_forks)
    out += " post " + from + "->" + to;
  if (s.rec->fork_rids) {
    out += " fork_rids";
    for (const auto& rid : *s.rec->fork_rids)
      out += " " + rid;
  }
  if (s.ctx.lease)
    out += " lease " + std::to_string(s.ctx.lease->slot);
  return out;
}

/// A random step over some of `rids`: labels, spans (some 0), padding
/// rows, forks for some requests, and a graph lease now and then.
inline walk_step random_step(std::mt19937& rng, const std::vector<request_id>& rids) {
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  walk_step s;
  s.rec = std::make_shared<recurrent_step>();
  auto chosen = rids;
  std::shuffle(chosen.begin(), chosen.end(), rng);
  chosen.resize(
      static_cast<std::size_t>(pick(1, std::min<int>(4, static_cast<int>(chosen.size())))));
  auto span = [&] { return coin(0.15) ? 0 : pick(1, 3); };
  for (const auto& rid : chosen) {
    s.rec->segments.push_back({rid, "main", span()});
    if (coin(0.3))
      s.rec->segments.push_back({rid, "draft", span()});
  }
  for (int i = pick(0, 2); i > 0; --i) {
    s.rec->segments.push_back({pads[static_cast<std::size_t>(i - 1)], "main", 1});
    s.ctx.padding_rows.insert(pads[static_cast<std::size_t>(i - 1)]);
  }
  std::shuffle(s.rec->segments.begin(), s.rec->segments.end(), rng);
  const int forks = pick(0, 9);
  if (forks < 2)
    s.rec->pre_forks = {{"main", "draft"}};
  else if (forks < 4)
    s.rec->post_forks = {{"main", "draft"}};
  else if (forks < 5)
    s.rec->pre_forks = {{"draft", "main"}};
  if (forks < 5 && coin(0.3)) {
    s.rec->fork_rids.emplace();
    for (const auto& rid : chosen)
      if (coin(0.5))
        s.rec->fork_rids->push_back(rid);
  }
  if (coin(0.3))
    s.ctx.lease = graph_lease{pick(0, 1), 8};
  auto kv = std::make_shared<kv_step>();
  kv->segments = s.rec->segments;
  kv->pre_forks = s.rec->pre_forks;
  kv->post_forks = s.rec->post_forks;
  kv->fork_rids = s.rec->fork_rids;
  auto other = std::make_shared<resource_step>();
  other->segments = s.rec->segments;
  s.bundle = {{"rec", s.rec}, {"kv", kv}, {"refuser", other}};
  return s;
}

}  // namespace mstar::resources::test::walk
