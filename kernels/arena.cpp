// The host arena: the pool's byte movements as the CPU reference page ops.
#include "kernels/arena.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/shm_arena.hpp"

namespace mstar::kernels {
namespace {

// Host-addressable memory (`Memory`: host_arena or shm_arena) with the CPU
// page ops.
template <class Memory>
class host_memory_arena final : public arena {
 public:
  explicit host_memory_arena(Memory memory) : memory_(std::move(memory)) {}

  [[nodiscard]] memory_kind kind() const noexcept override { return memory_kind::host; }
  [[nodiscard]] std::byte* data() noexcept override { return memory_.data(); }
  [[nodiscard]] const std::byte* data() const noexcept override { return memory_.data(); }
  [[nodiscard]] std::size_t size() const noexcept override { return memory_.size(); }

  void copy_pages(const kv_geometry& geometry, std::span<const std::int32_t> src,
                  std::span<const std::int32_t> dst) override {
    kernels::copy_pages(data(), geometry, src, dst);
  }
  void copy_slots(const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                  std::size_t slots) override {
    kernels::copy_slots(data(), geometry, src, dst, slots);
  }
  void zero_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages) override {
    kernels::zero_pages(data(), geometry, pages);
  }
  void pack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                  std::byte* staging) override {
    kernels::pack_pages(data(), geometry, pages, staging);
  }
  void unpack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                    const std::byte* staging) override {
    kernels::unpack_pages(data(), geometry, pages, staging);
  }

  void copy_slot(const slot_block& b, std::int32_t src, std::int32_t dst) override {
    kernels::copy_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, src, dst);
  }
  void zero_slot(const slot_block& b, std::int32_t slot) override {
    kernels::zero_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot);
  }
  void pack_slot(const slot_block& b, std::int32_t slot, std::byte* staging) override {
    kernels::pack_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot, staging);
  }
  void unpack_slot(const slot_block& b, std::int32_t slot, const std::byte* staging) override {
    kernels::unpack_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot, staging);
  }

  [[nodiscard]] result<void> read(std::size_t offset, std::span<std::byte> out) const override {
    if (auto ok = in_bounds(offset, out.size()); !ok)
      return ok;
    if (!out.empty())
      std::memcpy(out.data(), data() + offset, out.size());
    return {};
  }
  [[nodiscard]] result<void> write(std::size_t offset, std::span<const std::byte> in) override {
    if (auto ok = in_bounds(offset, in.size()); !ok)
      return ok;
    if (!in.empty())
      std::memcpy(data() + offset, in.data(), in.size());
    return {};
  }
  [[nodiscard]] std::string_view shared_name() const noexcept override {
    if constexpr (std::is_same_v<Memory, shm_arena>) {
      return memory_.name();
    } else {
      return {};
    }
  }
  [[nodiscard]] result<void> status() const override { return {}; }
  [[nodiscard]] result<void> synchronize() override { return {}; }

 private:
  [[nodiscard]] result<void> in_bounds(std::size_t offset, std::size_t n) const {
    return check_range(std::is_same_v<Memory, shm_arena> ? "shared-memory arena" : "host arena",
                       size(), offset, n);
  }
  Memory memory_;
};

}  // namespace

result<void> check_range(std::string_view what, std::size_t size, std::size_t offset,
                         std::size_t n) {
  if (offset > size || n > size - offset) {
    return make_error(errc::out_of_range, std::string{what} + " of " + std::to_string(size) +
                                              " bytes has no range [" + std::to_string(offset) +
                                              ", +" + std::to_string(n) + ")");
  }
  return {};
}

std::unique_ptr<arena> make_host_arena(std::size_t bytes) {
  return std::make_unique<host_memory_arena<host_arena>>(host_arena{bytes});
}

result<std::unique_ptr<arena>> make_shared_memory_arena(std::string_view name, std::size_t bytes) {
  auto segment = shm_arena::create(name, std::max<std::size_t>(bytes, 1));
  if (!segment)
    return segment.error();
  return std::unique_ptr<arena>(
      std::make_unique<host_memory_arena<shm_arena>>(std::move(*segment)));
}

arena_factory shared_memory_arena_factory(std::string prefix) {
  auto next = std::make_shared<int>(0);
  return [prefix = std::move(prefix), next](std::size_t bytes) {
    return make_shared_memory_arena(prefix + "-" + std::to_string((*next)++), bytes);
  };
}

result<std::unique_ptr<arena>> make_arena(const arena_factory& factory, std::size_t bytes) {
  if (!factory)
    return make_host_arena(bytes);
  return factory(bytes);
}

}  // namespace mstar::kernels
