#pragma once

// The two roles of a multi-process transfer test, written to run in either
// a forked child (reporting through its exit code) or the test process:
// a source that fills and serves a KV arena, and a destination that pulls
// every page of it (rotated, so runs coalesce and wrap) and verifies bytes
// and sender checksums.

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/host_arena.hpp"
#include "tests/transport/multiproc_support.hpp"
#include "tests/transport/support.hpp"
#include "transport/agent.hpp"
#include "transport/checksum.hpp"
#include "transport/shm.hpp"

namespace mstar::transport::test {

/// What both roles agree on.
struct transfer_spec {
  agent_options options;      ///< the role's agent (name is overwritten)
  std::uint64_t pages = 128;  ///< pages in each arena
  std::uint64_t page_bytes = 2 << 20;
  std::uint32_t salt = 5;  ///< the source's pattern
  std::string deployment;  ///< non-empty: the source lives in a shm segment
  [[nodiscard]] arena_layout layout() const {
    return arena_layout{arena_kind::kv_pages, "kv", 1, pages, page_bytes};
  }
};

/// Source role: fills its arena, sends its descriptor and page checksums on
/// `out`, serves with a progress thread until `in` says "done". Exit codes:
/// 0 served, 10+ a failure (printed to stderr).
inline int serve_source(transfer_spec spec, const channel& out, const channel& in) {
  spec.options.name = "source";
  // The arena outlives the agent that registered it (register_arena): it is
  // destroyed after the agent has joined its progress thread.
  std::optional<kernels::shm_arena> segment;
  std::optional<kernels::host_arena> plain;
  auto a = agent::make(spec.options);
  if (!a)
    return fmt::print(stderr, "source: {}\n", describe(a.error())), 10;
  const auto layout = spec.layout();
  std::byte* base = nullptr;
  if (!spec.deployment.empty()) {
    auto s = create_segment(spec.deployment, "kv", layout.bytes());
    if (!s)
      return fmt::print(stderr, "source: {}\n", describe(s.error())), 11;
    segment.emplace(std::move(*s));
    base = segment->data();
  } else {
    plain.emplace(layout.bytes());
    base = plain->data();
  }
  fill_pattern(base, layout.bytes(), spec.salt);
  auto id = segment ? (*a)->register_segment(*segment, layout) : (*a)->register_arena(base, layout);
  if (!id)
    return fmt::print(stderr, "source: {}\n", describe(id.error())), 12;
  std::vector<std::int32_t> all;
  for (std::uint64_t p = 0; p < spec.pages; ++p)
    all.push_back(static_cast<std::int32_t>(p));
  auto sums = checksum_pages(layout, base, all);
  nlohmann::json sums_json = nlohmann::json::array();
  for (const auto& s : *sums)
    sums_json.push_back({s.unit, s.xxh3});
  if (!(*a)->start_progress_thread())
    return 13;
  if (!out.send(to_json(*(*a)->describe(*id))) || !out.send(sums_json.dump()))
    return 14;
  const auto reply = in.receive(std::chrono::seconds{90});
  return reply == "done" ? 0 : 15;
}

/// The destination's pairs: every page, rotated by half the arena.
inline std::vector<unit_pair> rotated_pairs(std::uint64_t pages) {
  std::vector<unit_pair> pairs;
  for (std::uint64_t p = 0; p < pages; ++p)
    pairs.push_back(
        {static_cast<std::int32_t>(p), static_cast<std::int32_t>((p + pages / 2) % pages)});
  return pairs;
}

/// Destination role: receives the source's descriptor and checksums on
/// `in`, pulls every page (deadline `deadline_s`), verifies every byte and
/// every checksum, then tells the source "done" on `out`. Returns "" on
/// success, else what went wrong.
inline std::string pull_and_verify(transfer_spec spec, const channel& in, const channel& out,
                                   double deadline_s) {
  spec.options.name = "destination";
  auto b = agent::make(spec.options);
  if (!b)
    return "destination agent: " + describe(b.error());
  const auto layout = spec.layout();
  kernels::host_arena dst{layout.bytes()};
  auto local = (*b)->register_arena(dst.data(), layout);
  const auto text = in.receive(std::chrono::seconds{60});
  const auto sums_text = in.receive(std::chrono::seconds{60});
  if (!local || !text || !sums_text)
    return "no descriptor from the source";
  auto d = descriptor_from_json(*text);
  if (!d)
    return describe(d.error());
  auto remote = (*b)->attach(*d);
  if (!remote)
    return "attach: " + describe(remote.error());
  const auto pairs = rotated_pairs(spec.pages);
  auto plan = plan_pages(d->layout, layout, pairs);
  auto h = (*b)->start(direction::read, *plan, {{*local, *remote}}, in_seconds(deadline_s));
  if (!h)
    return "start: " + describe(h.error());
  if (auto done = (*b)->wait(*h); !done)
    return "transfer: " + describe(done.error());
  for (const auto& p : pairs) {
    auto ok = holds_pattern(dst.data(), p.dst * spec.page_bytes, p.src * spec.page_bytes,
                            spec.page_bytes, spec.salt);
    if (!ok)
      return fmt::format("page {} (source {}): {}", p.dst, p.src, ok.message());
  }
  std::vector<unit_checksum> sums;
  for (const auto& s : nlohmann::json::parse(*sums_text))
    sums.push_back({s[0].get<std::int32_t>(), s[1].get<std::uint64_t>()});
  const std::byte* bases[] = {dst.data()};
  if (auto ok = verify_units(*plan, bases, sums); !ok)
    return describe(ok.error());
  b->reset();  // close the endpoint while the source still serves
  out.send("done");
  return {};
}

}  // namespace mstar::transport::test
