#pragma once

// The rendezvous token of a NCCL group, as a plain value: built without
// nccl.h, so a launcher (or a CPU-only build) can carry it through YAML, a
// command line or the environment as hex and hand it to every rank.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::parallel {

/// The 128 bytes of an `ncclUniqueId`: made once (`nccl_group::make_unique_id`,
/// by rank 0 or the launcher) and given to every rank's `nccl_group::create`.
/// It holds the socket address of NCCL's bootstrap root, which lives in the
/// process that made it: that process must stay up until every rank joined.
struct nccl_unique_id {
  /// NCCL_UNIQUE_ID_BYTES; nccl_group.cpp checks the two agree.
  static constexpr std::size_t size = 128;

  std::array<unsigned char, size> bytes{};

  /// 256 lowercase hex digits, two per byte in order.
  [[nodiscard]] std::string to_hex() const;

  /// The id `to_hex` wrote (either case accepted). parse_error naming the
  /// length or the first character that is not a hex digit; nothing is
  /// trimmed, so a stray newline from a file or `$(...)` is reported too.
  [[nodiscard]] static result<nccl_unique_id> from_hex(std::string_view hex);

  friend bool operator==(const nccl_unique_id&, const nccl_unique_id&) = default;
};

}  // namespace mstar::parallel
