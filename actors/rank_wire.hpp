#pragma once

// What a node's conductor process says to the processes of its other
// tensor-parallel ranks (its followers), and what they answer. One ordered
// stream a follower: every model call (begin / end of a sequence, the
// forward, launch and finish of a step, with its rows and the pools' plans)
// and every byte movement the pools ask of the follower's copy of their
// memory (page and slot copies, zeroing, writes), in the order the conductor
// made them, so the follower's model and memory go through exactly the
// conductor's sequence (actors/rank_processes.hpp). The collectives of the
// forward itself travel on the ranks' data group (parallel/), not here.
//
// Frames: a fixed header (magic, op, payload bytes) in the host's byte
// order, then the payload, serialized with CAF's binary serializer through
// the same inspectors that carry plans between nodes
// (actors/serialization.hpp). Requests that need an answer (pools, make an
// arena, bind, synchronize) get exactly one reply frame, in order; the rest
// get none: a follower that fails one sends `failed` with the error and
// leaves (its data group is aborted first, so the conductor's collective
// fails at once).

#include <array>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "actors/serialization.hpp"
#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "models/causal_lm.hpp"
#include "parallel/internal/socket_io.hpp"

namespace mstar::actors::ranks {

inline constexpr std::uint32_t magic = 0x5054534DU;  // "MSTP" in little-endian bytes
inline constexpr std::uint32_t version = 1;
/// The largest payload a frame may announce (a begin_sequence carries a
/// request's images; 1 GiB is far past any real one).
inline constexpr std::uint64_t max_payload = std::uint64_t{1} << 30;

enum class op : std::uint8_t {
  // follower -> conductor, first
  hello = 1,
  // conductor -> follower
  welcome,         ///< accepted: how to join the data group; or refused
  pools,           ///< models::pool_options -> text (the pools' shape) or error
  make_arena,      ///< arena_made_request -> kind or error
  bind,            ///< -> ok or error
  begin_sequence,  ///< sequence_begin
  end_sequence,    ///< request id
  forward,         ///< step_call
  launch,          ///< step_call with loopback
  finish,          ///< the oldest launched forward
  copy_pages,      ///< page_move
  copy_slots,      ///< slot_run
  zero_pages,      ///< page_move (src empty)
  copy_slot,       ///< slot_move
  zero_slot,       ///< slot_move (src unused)
  write,           ///< arena_write
  synchronize,     ///< arena id -> ok or error
  shutdown,        ///< the conductor is done: the follower leaves its loop
  // follower -> conductor
  reply_ok,
  reply_text,
  reply_error,  ///< error_wire
  failed,       ///< error_wire: a request without a reply failed; the follower leaves
};

/// The stable name of `o` for messages.
[[nodiscard]] const char* to_string(op o) noexcept;

struct frame_header {
  std::uint32_t magic = ranks::magic;
  std::uint8_t op = 0;
  std::uint8_t reserved[3] = {0, 0, 0};
  std::uint64_t bytes = 0;  ///< payload bytes that follow
};
static_assert(sizeof(frame_header) == 16, "the header has no padding");

/// A follower introducing itself.
struct hello_wire {
  std::uint32_t version = ranks::version;
  std::string token;
  std::int32_t rank = 0;
  std::int32_t ranks = 0;
};

/// The conductor's answer: empty `refusal` and where to join the data group
/// (the group factory's text, actors/rank_processes.hpp), or why not.
struct welcome_wire {
  std::string refusal;
  std::string group;
};

struct error_wire {
  std::uint8_t code = 0;
  std::string message;
};

struct arena_made_request {
  std::uint32_t id = 0;
  std::uint64_t bytes = 0;
};

struct sequence_begin {
  resources::request_id rid;
  std::vector<resources::token_id> prompt;
  std::vector<models::image_input> images;
};

struct row_wire {
  resources::request_id rid;
  std::vector<resources::token_id> tokens;
};

struct step_call {
  std::vector<row_wire> rows;
  std::optional<resources::kv_plan> kv;
  std::optional<resources::recurrent_plan> recurrent;
  std::vector<models::row_sampling> draws;
  std::vector<std::int32_t> loopback;
};

struct geometry_wire {
  std::int64_t page_size = 0, num_layers = 0, num_kv_heads = 0, head_dim = 0;
  std::uint8_t dtype = 0;
};

struct page_move {
  std::uint32_t id = 0;
  geometry_wire geometry;
  std::vector<std::int32_t> src;
  std::vector<std::int32_t> dst;  ///< zero_pages: the pages
};

struct slot_run {
  std::uint32_t id = 0;
  geometry_wire geometry;
  std::int32_t src = 0, dst = 0;
  std::uint64_t slots = 0;
};

struct slot_move {
  std::uint32_t id = 0;
  std::uint64_t offset = 0, num_layers = 0, max_slots = 0, slot_bytes = 0;
  std::int32_t src = 0, dst = 0;  ///< zero_slot: dst
};

struct arena_write {
  std::uint32_t id = 0;
  std::uint64_t offset = 0;
  std::vector<std::uint8_t> bytes;
};

[[nodiscard]] geometry_wire to_wire(const kernels::kv_geometry& g);
[[nodiscard]] kernels::kv_geometry from_wire(const geometry_wire& g);
[[nodiscard]] slot_move to_wire(std::uint32_t id, const kernels::slot_block& b, std::int32_t src,
                                std::int32_t dst);
[[nodiscard]] kernels::slot_block block_of(const slot_move& m);
[[nodiscard]] error_wire to_wire(const error& e);
[[nodiscard]] error from_wire(const error_wire& e);

/// A frame as it came off the stream.
struct frame {
  op kind{};
  std::vector<char> payload;
};

/// `x` serialized.
template <class T>
[[nodiscard]] std::vector<char> encode(T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{static_cast<caf::execution_unit*>(nullptr), buf};
  (void)sink(x);  // into a vector: cannot fail
  return buf;
}

/// The payload as a T, or parse_error naming `what` (a truncated or
/// malformed payload, bytes left over).
template <class T>
[[nodiscard]] result<T> decode(const std::vector<char>& payload, const char* what) {
  T x{};
  caf::binary_deserializer source{static_cast<caf::execution_unit*>(nullptr), payload};
  if (auto err = source(x); err || source.remaining() != 0) {
    return make_error(errc::parse_error,
                      std::string{"tensor-parallel rank stream: a malformed "} + what + " payload");
  }
  return x;
}

/// Writes one frame by `until`; io_error naming `peer` when the peer left.
[[nodiscard]] result<void> write_frame(int fd, op kind, const std::vector<char>& payload,
                                       parallel::internal::deadline until, const std::string& peer);
/// Reads one frame by `until`: io_error naming `peer` when it closed,
/// internal when the deadline passed, parse_error for a bad header.
[[nodiscard]] result<frame> read_frame(int fd, parallel::internal::deadline until,
                                       const std::string& peer);

/// A deadline `span` from now.
[[nodiscard]] parallel::internal::deadline after(std::chrono::milliseconds span);

}  // namespace mstar::actors::ranks

namespace mstar::models {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_sampling& x) {
  return f(caf::meta::type_name("row_sampling"), x.temperature, x.top_k, x.top_p, x.seed,
           x.counter);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_options& x) {
  return f(caf::meta::type_name("pool_options"), x.page_size, x.max_num_pages, x.max_slots,
           x.max_memory, x.prefix_cache, x.salt, x.checkpoint_slots, x.checkpoint_stride);
}

}  // namespace mstar::models

namespace mstar::actors::ranks {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hello_wire& x) {
  return f(caf::meta::type_name("hello"), x.version, x.token, x.rank, x.ranks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, welcome_wire& x) {
  return f(caf::meta::type_name("welcome"), x.refusal, x.group);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, error_wire& x) {
  return f(caf::meta::type_name("error"), x.code, x.message);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, arena_made_request& x) {
  return f(caf::meta::type_name("make_arena"), x.id, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sequence_begin& x) {
  return f(caf::meta::type_name("begin_sequence"), x.rid, x.prompt, x.images);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_wire& x) {
  return f(caf::meta::type_name("row"), x.rid, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_call& x) {
  auto kv = resources::optional_of(x.kv);
  auto recurrent = resources::optional_of(x.recurrent);
  return f(caf::meta::type_name("step_call"), x.rows, kv, recurrent, x.draws, x.loopback);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, geometry_wire& x) {
  return f(caf::meta::type_name("geometry"), x.page_size, x.num_layers, x.num_kv_heads, x.head_dim,
           x.dtype);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, page_move& x) {
  return f(caf::meta::type_name("page_move"), x.id, x.geometry, x.src, x.dst);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_run& x) {
  return f(caf::meta::type_name("slot_run"), x.id, x.geometry, x.src, x.dst, x.slots);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_move& x) {
  return f(caf::meta::type_name("slot_move"), x.id, x.offset, x.num_layers, x.max_slots,
           x.slot_bytes, x.src, x.dst);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, arena_write& x) {
  return f(caf::meta::type_name("arena_write"), x.id, x.offset, x.bytes);
}

}  // namespace mstar::actors::ranks
