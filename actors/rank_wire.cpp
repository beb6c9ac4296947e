// Frames between a conductor and its follower rank processes
// (actors/rank_wire.hpp).
#include "actors/rank_wire.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace mstar::actors::ranks {

const char* to_string(op o) noexcept {
  switch (o) {
    case op::hello:
      return "hello";
    case op::welcome:
      return "welcome";
    case op::pools:
      return "pools";
    case op::make_arena:
      return "make_arena";
    case op::bind:
      return "bind";
    case op::begin_sequence:
      return "begin_sequence";
    case op::end_sequence:
      return "end_sequence";
    case op::forward:
      return "forward";
    case op::launch:
      return "launch";
    case op::finish:
      return "finish";
    case op::copy_pages:
      return "copy_pages";
    case op::copy_slots:
      return "copy_slots";
    case op::zero_pages:
      return "zero_pages";
    case op::copy_slot:
      return "copy_slot";
    case op::zero_slot:
      return "zero_slot";
    case op::write:
      return "write";
    case op::synchronize:
      return "synchronize";
    case op::shutdown:
      return "shutdown";
    case op::reply_ok:
      return "reply_ok";
    case op::reply_text:
      return "reply_text";
    case op::reply_error:
      return "reply_error";
    case op::failed:
      return "failed";
  }
  return "unknown";
}

geometry_wire to_wire(const kernels::kv_geometry& g) {
  return {g.page_size, g.num_layers, g.num_kv_heads, g.head_dim,
          static_cast<std::uint8_t>(g.dtype)};
}

kernels::kv_geometry from_wire(const geometry_wire& g) {
  kernels::kv_geometry out;
  out.page_size = static_cast<std::int32_t>(g.page_size);
  out.num_layers = static_cast<std::int32_t>(g.num_layers);
  out.num_kv_heads = static_cast<std::int32_t>(g.num_kv_heads);
  out.head_dim = static_cast<std::int32_t>(g.head_dim);
  // The conductor sent a dtype it holds; anything past the last is read as
  // the last rather than as an enumerator that does not exist.
  out.dtype = static_cast<mstar::dtype>(
      std::min<std::uint8_t>(g.dtype, static_cast<std::uint8_t>(mstar::dtype::float16)));
  return out;
}

slot_move to_wire(std::uint32_t id, const kernels::slot_block& b, std::int32_t src,
                  std::int32_t dst) {
  return {id, b.offset, b.num_layers, b.max_slots, b.slot_bytes, src, dst};
}

kernels::slot_block block_of(const slot_move& m) {
  return {m.offset, m.num_layers, m.max_slots, m.slot_bytes};
}

error_wire to_wire(const error& e) {
  return {static_cast<std::uint8_t>(e.code()), e.message()};
}

error from_wire(const error_wire& e) {
  const auto last = static_cast<std::uint8_t>(errc::cancelled);
  const auto code = e.code >= 1 && e.code <= last ? static_cast<errc>(e.code) : errc::internal;
  return make_error(code, e.message);
}

parallel::internal::deadline after(std::chrono::milliseconds span) {
  return std::chrono::steady_clock::now() + span;
}

namespace {

error io_failure(const parallel::internal::io_outcome& out, const std::string& peer,
                 const char* doing) {
  using parallel::internal::io_status;
  if (out.status == io_status::timed_out) {
    return make_error(errc::internal, fmt::format("{} {}: timed out", doing, peer));
  }
  return make_error(errc::io_error, fmt::format("{} {}: {}", doing, peer, out.why));
}

}  // namespace

result<void> write_frame(int fd, op kind, const std::vector<char>& payload,
                         parallel::internal::deadline until, const std::string& peer) {
  frame_header h;
  h.op = static_cast<std::uint8_t>(kind);
  h.bytes = payload.size();
  std::array<std::byte, sizeof(frame_header)> head{};
  std::memcpy(head.data(), &h, sizeof h);
  using parallel::internal::io_status;
  if (auto out = parallel::internal::write_all(fd, head, until); out.status != io_status::done)
    return io_failure(out, peer, "writing to");
  if (payload.empty())
    return {};
  const std::span<const std::byte> body{reinterpret_cast<const std::byte*>(payload.data()),
                                        payload.size()};
  if (auto out = parallel::internal::write_all(fd, body, until); out.status != io_status::done)
    return io_failure(out, peer, "writing to");
  return {};
}

result<frame> read_frame(int fd, parallel::internal::deadline until, const std::string& peer) {
  using parallel::internal::io_status;
  std::array<std::byte, sizeof(frame_header)> head{};
  if (auto out = parallel::internal::read_all(fd, head, until); out.status != io_status::done)
    return io_failure(out, peer, "reading from");
  frame_header h;
  std::memcpy(&h, head.data(), sizeof h);
  if (h.magic != magic) {
    return make_error(
        errc::parse_error,
        fmt::format("reading from {}: not a rank stream (magic {:#x})", peer, h.magic));
  }
  if (h.op < static_cast<std::uint8_t>(op::hello) || h.op > static_cast<std::uint8_t>(op::failed)) {
    return make_error(errc::parse_error, fmt::format("reading from {}: unknown op {}", peer, h.op));
  }
  if (h.bytes > max_payload) {
    return make_error(errc::parse_error,
                      fmt::format("reading from {}: a {} frame of {} bytes (at most {})", peer,
                                  to_string(static_cast<op>(h.op)), h.bytes, max_payload));
  }
  frame f;
  f.kind = static_cast<op>(h.op);
  f.payload.resize(h.bytes);
  if (h.bytes > 0) {
    const std::span<std::byte> body{reinterpret_cast<std::byte*>(f.payload.data()),
                                    f.payload.size()};
    if (auto out = parallel::internal::read_all(fd, body, until); out.status != io_status::done)
      return io_failure(out, peer, "reading from");
  }
  return f;
}

}  // namespace mstar::actors::ranks
