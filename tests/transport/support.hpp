#pragma once

// Helpers shared by the transport tests: agents per UCX transport, arenas
// filled with a pattern that depends on (arena salt, byte offset), and
// checks that name the first differing byte.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

#include "kernels/host_arena.hpp"
#include "transport/agent.hpp"
#include "transport/error.hpp"

namespace mstar::transport::test {

/// The UCX settings of one test transport: "tcp" (loopback only), "sm"
/// (posix, sysv, cma) or "self".
inline context_options ucx_for(const std::string& tls) {
  context_options o;
  o.config = {{"TLS", tls}, {"NET_DEVICES", "lo"}};
  return o;
}

/// An agent named `name` over transport `tls`; fails the test if UCX
/// refuses.
inline std::unique_ptr<agent> make_agent(const std::string& name, const std::string& tls,
                                         bool map_segments = true) {
  agent_options o;
  o.name = name;
  o.ucx = ucx_for(tls);
  o.map_same_host_segments = map_segments;
  // UCX 1.13's shared-memory transports cannot report a dead peer; asking
  // would only print UCX's error line before the fallback.
  o.detect_peer_failure = tls != "sm";
  auto a = agent::make(std::move(o));
  if (!a) {
    ADD_FAILURE() << "agent::make(" << tls << "): " << describe(a.error());
    return nullptr;
  }
  return std::move(*a);
}

/// The pattern word at byte `offset` (a multiple of 8) of an arena salted
/// `salt`: differs between neighbouring pages and between arenas, so a
/// misplaced or stale page shows.
inline std::uint64_t pattern(std::uint64_t offset, std::uint32_t salt) {
  std::uint64_t x = (offset >> 3) + 0x9E3779B97F4A7C15ULL * (salt + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// Fills `bytes` (a multiple of 8) from `data` with the pattern of `salt`.
inline void fill_pattern(std::byte* data, std::uint64_t bytes, std::uint32_t salt) {
  for (std::uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = pattern(i, salt);
    std::memcpy(data + i, &word, 8);
  }
}

/// Whether `[dst_offset, +bytes)` of `dst` holds what `[src_offset, +bytes)`
/// of an arena filled with `salt` held (offsets and length multiples of 8);
/// reports the first differing word.
inline ::testing::AssertionResult holds_pattern(const std::byte* dst, std::uint64_t dst_offset,
                                                std::uint64_t src_offset, std::uint64_t bytes,
                                                std::uint32_t salt) {
  for (std::uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t want = pattern(src_offset + i, salt);
    std::uint64_t got = 0;
    std::memcpy(&got, dst + dst_offset + i, 8);
    if (got != want) {
      return ::testing::AssertionFailure()
             << "word at byte " << dst_offset + i << " is " << got << ", want " << want
             << " (source byte " << src_offset + i << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

/// A deadline `seconds` from now.
inline clock::time_point in_seconds(double seconds) {
  return clock::now() +
         std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace mstar::transport::test
