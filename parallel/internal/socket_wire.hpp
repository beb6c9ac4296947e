#pragma once

// What the ranks of a socket group say to each other. Fixed-size records in
// the host's byte order (the ranks of one group run on one machine, or on
// machines of one kind; the magic number tells a peer of the other order),
// each followed by the payload its length field announces.
//
// Forming: a joining rank sends `hello` and its token; rank 0 answers each
// with `welcome`: a refusal at once, an acceptance once every rank is in.
// Collectives: every rank sends rank 0 a `frame` naming its call (op, count,
// root, sequence number) and its payload; rank 0 answers each with a `reply`
// frame and the result, or, once the group is broken, a verdict frame saying
// why (`gone`, `late`, `broken`). A rank that aborts sends `gone` naming
// itself; rank 0 relays it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mstar::parallel::internal {

inline constexpr std::uint32_t wire_magic = 0x4754534DU;  // "MSTG" in little-endian bytes
inline constexpr std::uint16_t wire_version = 1;
/// The longest group token a rank may send (a launcher's random token is ~32).
inline constexpr std::size_t max_token_bytes = 1024;
/// The longest reason or message a verdict frame carries.
inline constexpr std::size_t max_text_bytes = 64 * 1024;

struct hello {
  std::uint32_t magic = wire_magic;
  std::uint16_t version = wire_version;
  std::uint16_t reserved = 0;
  std::int32_t size = 0;  ///< ranks in the group, as the joiner was told
  std::int32_t rank = 0;
  std::uint32_t token_bytes = 0;  ///< the token follows
};

struct welcome {
  std::uint32_t magic = wire_magic;
  std::uint32_t refusal = 0;     ///< 0: accepted; else the errc of the refusal
  std::uint32_t text_bytes = 0;  ///< the reason follows
  std::uint32_t reserved = 0;
};

enum class frame_kind : std::uint32_t {
  all_reduce_sum = 1,
  all_gather = 2,
  broadcast = 3,
  reply = 4,   ///< rank 0's answer; the payload is the result
  gone = 5,    ///< rank `root` left the group; the payload is the reason
  late = 6,    ///< rank `root` did not arrive within `count` ms
  broken = 7,  ///< the group broke; the payload is the error message
};

struct frame {
  frame_kind kind{};
  std::int32_t root = -1;   ///< broadcast's root; the rank a verdict names
  std::uint64_t seq = 0;    ///< the sender's collective number, from 1
  std::uint64_t count = 0;  ///< elements (bytes for broadcast)
  std::uint64_t bytes = 0;  ///< payload bytes that follow
};

static_assert(sizeof(hello) == 20 && sizeof(welcome) == 16 && sizeof(frame) == 32,
              "wire records have no padding");

/// `r` as the bytes that go on the wire.
template <class Record>
std::array<std::byte, sizeof(Record)> to_bytes(const Record& r) {
  static_assert(std::is_trivially_copyable_v<Record>);
  std::array<std::byte, sizeof(Record)> out;
  std::memcpy(out.data(), &r, sizeof(Record));
  return out;
}

/// The record in `bytes` (exactly sizeof(Record) of them).
template <class Record>
Record from_bytes(const std::array<std::byte, sizeof(Record)>& bytes) {
  Record r;
  std::memcpy(&r, bytes.data(), sizeof(Record));
  return r;
}

}  // namespace mstar::parallel::internal
