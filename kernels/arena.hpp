#pragma once

// Where a pool keeps its bytes, and how bytes move inside them. A pool owns
// one `arena` per storage block and never touches the bytes itself: every
// copy, zeroing, packing and unpacking goes through the arena, which runs it
// inline on the host or as a kernel on its own CUDA stream. So the KV and
// recurrent pools run unchanged on host memory, shared memory a transport
// registered, or device memory.
//
// Operations on well-formed arguments (page and slot ids the pool made)
// cannot fail on the host. On a device they can only fail through the device
// itself; the first such error is converted where it is seen, sticks to the
// arena and is returned by `status()` and `synchronize()`, and later
// operations are skipped.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "kernels/host_arena.hpp"
#include "kernels/page_ops.hpp"

namespace mstar::kernels {

/// Which memory an arena's address is in.
enum class memory_kind : std::uint8_t { host, device };

/// One recurrent block inside an arena: `[num_layers][max_slots][slot_bytes]`
/// starting `offset` bytes in.
struct slot_block {
  std::size_t offset = 0;
  std::size_t num_layers = 0;
  std::size_t max_slots = 0;
  std::size_t slot_bytes = 0;
};

/// A fixed block of memory that never moves, with the byte movements pools
/// need. Plans and views may hold `data()` for the arena's lifetime.
class arena {
 public:
  arena() = default;
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;
  virtual ~arena() = default;

  [[nodiscard]] virtual memory_kind kind() const noexcept = 0;
  /// The base address: a host pointer, or a device pointer for `device`.
  [[nodiscard]] virtual std::byte* data() noexcept = 0;
  [[nodiscard]] virtual const std::byte* data() const noexcept = 0;
  [[nodiscard]] virtual std::size_t size() const noexcept = 0;

  // Page-major KV pages (kernels/page_ops.hpp). Page lists are host arrays.
  virtual void copy_pages(const kv_geometry& geometry, std::span<const std::int32_t> src,
                          std::span<const std::int32_t> dst) = 0;
  virtual void copy_slots(const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                          std::size_t slots) = 0;
  virtual void zero_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages) = 0;
  /// `pages` into the contiguous `staging` (memory of the arena's kind).
  virtual void pack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                          std::byte* staging) = 0;
  virtual void unpack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                            const std::byte* staging) = 0;

  // Recurrent slots of one block.
  virtual void copy_slot(const slot_block& block, std::int32_t src, std::int32_t dst) = 0;
  virtual void zero_slot(const slot_block& block, std::int32_t slot) = 0;
  virtual void pack_slot(const slot_block& block, std::int32_t slot, std::byte* staging) = 0;
  virtual void unpack_slot(const slot_block& block, std::int32_t slot,
                           const std::byte* staging) = 0;

  /// Copies `out.size()` bytes at `offset` into host memory, after the work
  /// queued before it (blocking). For checks and tests, not the hot path.
  [[nodiscard]] virtual result<void> read(std::size_t offset, std::span<std::byte> out) const = 0;
  /// Writes host bytes at `offset`, ordered after the queued work; returns
  /// once `in` may be reused.
  [[nodiscard]] virtual result<void> write(std::size_t offset, std::span<const std::byte> in) = 0;
  /// The name of the shared-memory segment a same-host process can map to
  /// reach these bytes (kernels/shm_arena.hpp), empty when not shared.
  [[nodiscard]] virtual std::string_view shared_name() const noexcept { return {}; }
  /// The copy of these bytes that tensor-parallel rank `rank` computes on:
  /// an arena replicated across ranks (kernels/replicated_arena.hpp) keeps
  /// one member per rank; any other arena is its own only member.
  [[nodiscard]] virtual arena& member(int rank) {
    (void)rank;
    return *this;
  }
  /// The first error any operation met (success on the host).
  [[nodiscard]] virtual result<void> status() const = 0;
  /// Waits for the queued work; then `status()`.
  [[nodiscard]] virtual result<void> synchronize() = 0;
};

/// Success when [offset, offset + n) lies inside an arena of `size` bytes,
/// else out_of_range naming `what` ("host arena") and the range.
[[nodiscard]] result<void> check_range(std::string_view what, std::size_t size, std::size_t offset,
                                       std::size_t n);

/// Makes a zeroed arena of `bytes` bytes; what a pool is given to choose its
/// memory. An empty function means host memory.
using arena_factory = std::function<result<std::unique_ptr<arena>>(std::size_t bytes)>;

/// A zeroed host arena of `bytes` (64-byte aligned, never moves).
[[nodiscard]] std::unique_ptr<arena> make_host_arena(std::size_t bytes);

/// A zeroed host arena of `bytes` in a new named shared-memory segment
/// (kernels/shm_arena.hpp's naming rules), removed when the arena goes:
/// what a transport registers so a same-host peer maps pages without copies.
[[nodiscard]] result<std::unique_ptr<arena>> make_shared_memory_arena(std::string_view name,
                                                                      std::size_t bytes);

/// A factory making shared-memory arenas named "<prefix>-0", "<prefix>-1",
/// ... in the order they are asked for (one per pool or recurrent block).
[[nodiscard]] arena_factory shared_memory_arena_factory(std::string prefix);

/// `factory(bytes)`, or a host arena for an empty factory.
[[nodiscard]] result<std::unique_ptr<arena>> make_arena(const arena_factory& factory,
                                                        std::size_t bytes);

}  // namespace mstar::kernels
