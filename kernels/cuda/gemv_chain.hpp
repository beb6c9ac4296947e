#pragma once

// A chain of one-row bf16 products in one persistent launch (gemv_chain.cu),
// issue 17's batch-1 lever: each separate GEMV launch carries ~2-3 us beyond
// its bytes at the copy rate (its ramp and its drain; bench/results/
// session47-calls/README.md), because a product's weights can only start
// streaming once the kernel before has let its blocks onto the SMs. Here one
// block an SM walks every link: each warp keeps the weight pieces of its
// next two chunks in flight across a link's end, so while the grid meets at
// the barrier that lets link i + 1 read link i's output, the bus already
// carries link i + 1's weights. An experiment for the batch-1 step (the
// models do not call it yet): `mstar-gpu-bench --suite gemv-chain` times it
// against the same links as separate chained GEMVs.

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <span>

namespace mstar::kernels::cuda {

/// One product of a chain: out[j] = sum_i bf16(in[i]) * weight[j][i] for j
/// < n, f32 sums, bf16(in) as to_bf16 rounds it; each output is the bits
/// of `activation_linear_bf16` (no function) at GEMV entry 5 for the same
/// operands.
struct gemv_chain_link {
  const std::uint16_t* weight = nullptr;  ///< [n][k] bf16, 16-byte aligned
  const float* in =
      nullptr;           ///< [k] f32, 16-byte aligned: a kernel's before or an earlier link's out
  float* out = nullptr;  ///< [n] f32; no other link's `in` or `out` may overlap it
  std::int32_t n = 0;    ///< outputs, at least 1
  std::int32_t k = 0;    ///< a multiple of 8, at most gemv_chain_max_k
};

/// The most links a launch takes.
inline constexpr int gemv_chain_max_links = 16;

/// The widest input a link takes (its bf16 row is held in shared memory).
inline constexpr std::int32_t gemv_chain_max_k = 8192;

/// Bytes of the device memory `gemv_chain` meets in: zeroed once (cudaMemset)
/// before its first launch; every launch leaves it zeroed again.
inline constexpr std::size_t gemv_chain_counter_bytes =
    (2 * gemv_chain_max_links + 1) * sizeof(std::uint32_t);

/// How a link's rows reach the warps: `fixed`, warp g of W takes rows g,
/// g + W, ...; `grabbed`, each warp takes the next row of a counter once it
/// starts its row before (atomics, one row ahead), so warps that stream
/// faster take more rows. Either gives the same bits (a row is one warp's).
enum class gemv_chain_rows { fixed, grabbed };

/// Whether `gemv_chain` takes `links`: 1 to gemv_chain_max_links of them,
/// each as gemv_chain_link documents.
[[nodiscard]] bool gemv_chain_fits(std::span<const gemv_chain_link> links);

/// Runs `links` in order, link i + 1 reading after every output of link i
/// (and of those before) is written: one launch of a block on every SM,
/// which must all be resident at once (nothing else may hold the whole
/// device while it runs). Chained (programmatic dependent launch) on the
/// kernel before where chained launches are on: its weights stream before
/// that kernel ends. `counters`: gemv_chain_counter_bytes, as documented
/// there, used by one launch at a time. cudaErrorInvalidValue where not
/// gemv_chain_fits or `counters` is null.
[[nodiscard]] cudaError_t gemv_chain(std::span<const gemv_chain_link> links,
                                     std::uint32_t* counters, cudaStream_t stream,
                                     gemv_chain_rows rows = gemv_chain_rows::grabbed);

}  // namespace mstar::kernels::cuda
