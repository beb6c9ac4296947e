#include <algorithm>
#include <initializer_list>

#include "kernels/cuda/internal/common.cuh"
#include "kernels/cuda/page_ops.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::ceil_div;

constexpr int copy_threads = 256;
constexpr int copy_unroll = 4;

// Each item i is one (dst, src) pair of `bytes` bytes; a null src zero-fills.
struct span_pair {
  std::byte* dst;
  const std::byte* src;
};

// Copies `units` Units per item, items along grid y, units along grid x, four
// independent loads in flight per thread before their stores.
template <class Unit, class Addr>
__global__ void copy_items(Addr addr, std::int64_t items, std::int64_t units) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = blockIdx.y; i < items; i += gridDim.y) {
    const span_pair pair = addr(i);
    if (pair.dst == nullptr)
      continue;
    auto* d = reinterpret_cast<Unit*>(pair.dst);
    const auto* s = reinterpret_cast<const Unit*>(pair.src);
    std::int64_t u = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
    if (s == nullptr) {
      for (; u < units; u += stride)
        d[u] = Unit{};
      continue;
    }
    for (; u + (copy_unroll - 1) * stride < units; u += copy_unroll * stride) {
      Unit v[copy_unroll];
#pragma unroll
      for (int k = 0; k < copy_unroll; ++k)
        v[k] = s[u + k * stride];
#pragma unroll
      for (int k = 0; k < copy_unroll; ++k)
        d[u + k * stride] = v[k];
    }
    for (; u < units; u += stride)
      d[u] = s[u];
  }
}

// The widest unit (16, 4 or 1 bytes) dividing every address and size given.
std::size_t unit_for(std::initializer_list<std::uintptr_t> values) {
  std::uintptr_t all = 0;
  for (const auto v : values)
    all |= v;
  if (all % 16 == 0)
    return 16;
  return all % 4 == 0 ? 4 : 1;
}

template <class Unit, class Addr>
cudaError_t launch_units(Addr addr, std::int64_t items, std::size_t bytes, cudaStream_t stream) {
  const auto units = static_cast<std::int64_t>(bytes / sizeof(Unit));
  const std::int64_t per_block = std::int64_t{copy_threads} * copy_unroll;
  const auto x = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(units, per_block), 1024));
  const auto y = static_cast<unsigned>(std::min<std::int64_t>(items, 65535));
  copy_items<Unit><<<dim3{x, y}, copy_threads, 0, stream>>>(addr, items, units);
  return detail::launch_status();
}

// Launches `addr` over `items` items of `bytes` bytes, with the widest unit
// `alignment` (every base address and per-item offset OR-ed) allows.
template <class Addr>
cudaError_t launch_copy(Addr addr, std::int64_t items, std::size_t bytes, std::uintptr_t alignment,
                        cudaStream_t stream) {
  if (items <= 0 || bytes == 0)
    return cudaSuccess;
  switch (unit_for({alignment, bytes})) {
    case 16:
      return launch_units<uint4>(addr, items, bytes, stream);
    case 4:
      return launch_units<std::uint32_t>(addr, items, bytes, stream);
    default:
      return launch_units<std::uint8_t>(addr, items, bytes, stream);
  }
}

std::uintptr_t addr_bits(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

struct page_to_page {
  std::byte* arena;
  std::size_t page_bytes;
  const std::int32_t* src;
  const std::int32_t* dst;
  __device__ span_pair operator()(std::int64_t i) const {
    return {arena + static_cast<std::size_t>(dst[i]) * page_bytes,
            arena + static_cast<std::size_t>(src[i]) * page_bytes};
  }
};

struct zero_page {
  std::byte* arena;
  std::size_t page_bytes;
  const std::int32_t* pages;
  __device__ span_pair operator()(std::int64_t i) const {
    return {arena + static_cast<std::size_t>(pages[i]) * page_bytes, nullptr};
  }
};

struct page_to_staging {
  const std::byte* arena;
  std::size_t page_bytes;
  const std::int32_t* pages;
  std::byte* staging;
  __device__ span_pair operator()(std::int64_t i) const {
    return {staging + static_cast<std::size_t>(i) * page_bytes,
            arena + static_cast<std::size_t>(pages[i]) * page_bytes};
  }
};

struct staging_to_page {
  std::byte* arena;
  std::size_t page_bytes;
  const std::int32_t* pages;
  const std::byte* staging;
  __device__ span_pair operator()(std::int64_t i) const {
    return {arena + static_cast<std::size_t>(pages[i]) * page_bytes,
            staging + static_cast<std::size_t>(i) * page_bytes};
  }
};

// Run r = layer * 2 + half of pages src -> dst (copy_slots).
struct run_to_run {
  std::byte* dst;
  const std::byte* src;
  std::size_t run_bytes;
  __device__ span_pair operator()(std::int64_t r) const {
    return {dst + static_cast<std::size_t>(r) * run_bytes,
            src + static_cast<std::size_t>(r) * run_bytes};
  }
};

// One layer's K (or V) run of every page: `run_offset` bytes into a page.
struct token_addr {
  std::size_t page_bytes, token_bytes, run_offset;
  __device__ std::size_t offset(token_position t) const {
    return static_cast<std::size_t>(t.page) * page_bytes + run_offset +
           static_cast<std::size_t>(t.offset) * token_bytes;
  }
};

token_addr token_addr_of(const kv_geometry& g, std::size_t layer, kv_half half) {
  return {g.page_bytes(), g.token_bytes(), g.slot_offset(0, layer, half, 0)};
}

struct gather_addr {
  const std::byte* arena;
  token_addr at;
  const token_position* tokens;
  std::byte* out;
  __device__ span_pair operator()(std::int64_t i) const {
    return {out + static_cast<std::size_t>(i) * at.token_bytes, arena + at.offset(tokens[i])};
  }
};

struct scatter_addr {
  std::byte* arena;
  token_addr at;
  const token_position* tokens;
  std::int64_t count;
  const std::byte* in;
};

// One block per token; a token that a later entry overwrites is skipped, so
// duplicates end with the later token as on the CPU.
template <class Unit>
__global__ void scatter_kernel(scatter_addr a, std::int64_t units) {
  for (std::int64_t i = blockIdx.x; i < a.count; i += gridDim.x) {
    const token_position mine = a.tokens[i];
    bool later = false;
    for (std::int64_t j = i + 1 + threadIdx.x; j < a.count; j += blockDim.x)
      later = later || (a.tokens[j].page == mine.page && a.tokens[j].offset == mine.offset);
    if (__syncthreads_or(later))
      continue;
    auto* d = reinterpret_cast<Unit*>(a.arena + a.at.offset(mine));
    const auto* s =
        reinterpret_cast<const Unit*>(a.in + static_cast<std::size_t>(i) * a.at.token_bytes);
    for (std::int64_t u = threadIdx.x; u < units; u += blockDim.x)
      d[u] = s[u];
  }
}

template <class Unit>
cudaError_t launch_scatter(const scatter_addr& a, cudaStream_t stream) {
  const auto units = static_cast<std::int64_t>(a.at.token_bytes / sizeof(Unit));
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(a.count, 1 << 20));
  scatter_kernel<Unit><<<blocks, 128, 0, stream>>>(a, units);
  return detail::launch_status();
}

struct slot_addr {
  std::byte* base;
  std::size_t max_slots, slot_bytes;
  std::int64_t slot;
  __device__ std::byte* at(std::int64_t layer, std::int64_t s) const {
    return base +
           (static_cast<std::size_t>(layer) * max_slots + static_cast<std::size_t>(s)) * slot_bytes;
  }
};

struct slot_copy {
  slot_addr a;
  std::int64_t dst;
  __device__ span_pair operator()(std::int64_t l) const { return {a.at(l, dst), a.at(l, a.slot)}; }
};

struct slot_zero {
  slot_addr a;
  __device__ span_pair operator()(std::int64_t l) const { return {a.at(l, a.slot), nullptr}; }
};

struct slot_pack {
  slot_addr a;
  std::byte* staging;
  __device__ span_pair operator()(std::int64_t l) const {
    return {staging + static_cast<std::size_t>(l) * a.slot_bytes, a.at(l, a.slot)};
  }
};

struct slot_unpack {
  slot_addr a;
  const std::byte* staging;
  __device__ span_pair operator()(std::int64_t l) const {
    return {a.at(l, a.slot), staging + static_cast<std::size_t>(l) * a.slot_bytes};
  }
};

std::int64_t count_of(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
  return static_cast<std::int64_t>(std::min(a.size(), b.size()));
}

}  // namespace

cudaError_t copy_pages(std::byte* arena, const kv_geometry& geometry,
                       std::span<const std::int32_t> src, std::span<const std::int32_t> dst,
                       cudaStream_t stream) {
  const std::size_t page = geometry.page_bytes();
  const page_to_page addr{arena, page, src.data(), dst.data()};
  return launch_copy(addr, count_of(src, dst), page, addr_bits(arena) | page, stream);
}

cudaError_t copy_pages(std::byte* arena, const kv_geometry& geometry,
                       std::span<const std::int32_t> src, std::span<const std::int32_t> dst,
                       std::byte* staging, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(count_of(src, dst));
  if (const cudaError_t err = pack_pages(arena, geometry, src.first(n), staging, stream);
      err != cudaSuccess) {
    return err;
  }
  return unpack_pages(arena, geometry, dst.first(n), staging, stream);
}

cudaError_t copy_slots(std::byte* arena, const kv_geometry& geometry, std::int32_t src,
                       std::int32_t dst, std::size_t slots, cudaStream_t stream) {
  if (src == dst)
    return cudaSuccess;  // the CPU's memmove onto itself
  const std::size_t page = geometry.page_bytes();
  const std::size_t run = geometry.half_bytes();
  const run_to_run addr{arena + static_cast<std::size_t>(dst) * page,
                        arena + static_cast<std::size_t>(src) * page, run};
  return launch_copy(addr, std::int64_t{geometry.num_layers} * 2, slots * geometry.token_bytes(),
                     addr_bits(arena) | page | run, stream);
}

cudaError_t zero_pages(std::byte* arena, const kv_geometry& geometry,
                       std::span<const std::int32_t> pages, cudaStream_t stream) {
  const std::size_t page = geometry.page_bytes();
  const zero_page addr{arena, page, pages.data()};
  return launch_copy(addr, static_cast<std::int64_t>(pages.size()), page, addr_bits(arena) | page,
                     stream);
}

cudaError_t gather_tokens(const std::byte* arena, const kv_geometry& geometry, std::size_t layer,
                          kv_half half, std::span<const token_position> tokens, std::byte* out,
                          cudaStream_t stream) {
  const token_addr at = token_addr_of(geometry, layer, half);
  const gather_addr addr{arena, at, tokens.data(), out};
  return launch_copy(addr, static_cast<std::int64_t>(tokens.size()), at.token_bytes,
                     addr_bits(arena) | addr_bits(out) | at.page_bytes | at.token_bytes, stream);
}

cudaError_t scatter_tokens(std::byte* arena, const kv_geometry& geometry, std::size_t layer,
                           kv_half half, std::span<const token_position> tokens,
                           const std::byte* in, cudaStream_t stream) {
  const token_addr at = token_addr_of(geometry, layer, half);
  const auto count = static_cast<std::int64_t>(tokens.size());
  if (count == 0 || at.token_bytes == 0)
    return cudaSuccess;
  const scatter_addr a{arena, at, tokens.data(), count, in};
  switch (unit_for({addr_bits(arena), addr_bits(in), at.page_bytes, at.token_bytes})) {
    case 16:
      return launch_scatter<uint4>(a, stream);
    case 4:
      return launch_scatter<std::uint32_t>(a, stream);
    default:
      return launch_scatter<std::uint8_t>(a, stream);
  }
}

cudaError_t pack_pages(const std::byte* arena, const kv_geometry& geometry,
                       std::span<const std::int32_t> pages, std::byte* staging,
                       cudaStream_t stream) {
  const std::size_t page = geometry.page_bytes();
  const page_to_staging addr{arena, page, pages.data(), staging};
  return launch_copy(addr, static_cast<std::int64_t>(pages.size()), page,
                     addr_bits(arena) | addr_bits(staging) | page, stream);
}

cudaError_t unpack_pages(std::byte* arena, const kv_geometry& geometry,
                         std::span<const std::int32_t> pages, const std::byte* staging,
                         cudaStream_t stream) {
  const std::size_t page = geometry.page_bytes();
  const staging_to_page addr{arena, page, pages.data(), staging};
  return launch_copy(addr, static_cast<std::int64_t>(pages.size()), page,
                     addr_bits(arena) | addr_bits(staging) | page, stream);
}

cudaError_t copy_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                      std::size_t slot_bytes, std::int32_t src, std::int32_t dst,
                      cudaStream_t stream) {
  if (src == dst)
    return cudaSuccess;
  const slot_copy addr{{block_base, max_slots, slot_bytes, src}, dst};
  return launch_copy(addr, static_cast<std::int64_t>(num_layers), slot_bytes,
                     addr_bits(block_base) | slot_bytes, stream);
}

cudaError_t zero_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                      std::size_t slot_bytes, std::int32_t slot, cudaStream_t stream) {
  const slot_zero addr{{block_base, max_slots, slot_bytes, slot}};
  return launch_copy(addr, static_cast<std::int64_t>(num_layers), slot_bytes,
                     addr_bits(block_base) | slot_bytes, stream);
}

cudaError_t pack_slot(const std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                      std::size_t slot_bytes, std::int32_t slot, std::byte* staging,
                      cudaStream_t stream) {
  // The block is only read; slot_addr holds a mutable pointer for the shared code.
  const slot_pack addr{{const_cast<std::byte*>(block_base), max_slots, slot_bytes, slot}, staging};
  return launch_copy(addr, static_cast<std::int64_t>(num_layers), slot_bytes,
                     addr_bits(block_base) | addr_bits(staging) | slot_bytes, stream);
}

cudaError_t unpack_slot(std::byte* block_base, std::size_t num_layers, std::size_t max_slots,
                        std::size_t slot_bytes, std::int32_t slot, const std::byte* staging,
                        cudaStream_t stream) {
  const slot_unpack addr{{block_base, max_slots, slot_bytes, slot}, staging};
  return launch_copy(addr, static_cast<std::int64_t>(num_layers), slot_bytes,
                     addr_bits(block_base) | addr_bits(staging) | slot_bytes, stream);
}

}  // namespace mstar::kernels::cuda
