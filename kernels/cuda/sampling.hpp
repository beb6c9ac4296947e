#pragma once

// Batched device sampling with kernels/sampling.hpp's rules and generator:
// row r with settings (temperature[r], top_k[r], top_p[r], seed[r],
// counter[r]) draws what `mstar::kernels::sample` draws for a
// `sampling_params` holding the same values.

#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/sampling.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::kernels::cuda {

/// Operands of `sample`: R rows of logits and each row's `sampling_params`
/// fields as device arrays (a null array gives every row the field's
/// default: temperature 0, top_k 0, top_p 1, seed 0, counter 0).
struct sample_batch_params {
  view<const float, 2> logits;             ///< [R, V] f32 scores; -inf masks a token
  const float* temperature = nullptr;      ///< [R] f32, >= 0; 0 is greedy
  const std::int32_t* top_k = nullptr;     ///< [R] int32, >= 0; 0 keeps all
  const float* top_p = nullptr;            ///< [R] f32 in (0, 1]
  const std::uint64_t* seed = nullptr;     ///< [R] u64: the request's seed
  const std::uint64_t* counter = nullptr;  ///< [R] u64: draws the request made so far
  std::int32_t* out = nullptr;             ///< [R] int32: the token drawn, or -1 where the
                                           ///< CPU reference returns an error
};

/// One block per row. Greedy rows take the argmax (ties to the lowest id).
/// Sampled rows find the CPU's candidate order without sorting: keys (logit,
/// then lower id first) are unique, and radix selection over them (by count
/// for top-k, by probability mass for top-p and for the draw) finds the cut
/// and the drawn token, with masses in f64. Masses are summed in a different
/// order than on the CPU, so a draw within ~1e-15 of a boundary may differ.
/// Errors (cudaErrorInvalidValue) only for shapes; bad settings or logits
/// give -1 in that row.
[[nodiscard]] cudaError_t sample(const sample_batch_params& p, cudaStream_t stream);

/// Greedy decoding only: `out[r]` = argmax of row r (ties to the lowest id),
/// or -1 for a row with a NaN or +inf or no finite entry.
[[nodiscard]] cudaError_t argmax(view<const float, 2> logits, std::int32_t* out,
                                 cudaStream_t stream);

/// Operands of `loopback_ids`: decode rows that feed the token the previous
/// forward drew, without the id crossing to the host.
struct loopback_params {
  std::int32_t* ids = nullptr;          ///< [T] int32: the step's input ids, written in place
  const std::int32_t* pairs = nullptr;  ///< [2n] int32: (position in ids, row of drawn) pairs
  const std::int32_t* drawn = nullptr;  ///< [R'] int32: the previous forward's draws
  std::int64_t n = 0;                   ///< looped-back rows
};

/// `ids[pairs[2i]] = drawn[pairs[2i + 1]]` for each i < n. The positions
/// and rows are the caller's, checked on the host (check_loopback); a -1
/// draw (a refused row) goes in as it is and the embedding reads zeros.
[[nodiscard]] cudaError_t loopback_ids(const loopback_params& p, cudaStream_t stream);

/// Ints of a plan that `plan_upload_params::inline_plan` holds: 1,536
/// bytes, so the launch's parameters stay under 2 KB.
inline constexpr std::int64_t plan_inline_capacity = 384;

/// Operands of `upload_plan`: a step's plan read by the kernel itself from
/// pinned host memory (mapped: the device reads it over the bus), in place
/// of a copy-engine upload followed by `loopback_ids`; or, `inlined`, from
/// the launch's own parameters (no read over the bus: a plan of at most
/// plan_inline_capacity ints, copied in by the host).
struct alignas(16) plan_upload_params {
  std::int32_t* dst = nullptr;        ///< [n] int32, device: the plan as the step's kernels read it
  const std::int32_t* src = nullptr;  ///< [n] int32, pinned host memory's device address
  std::int64_t n = 0;                 ///< ints to copy
  std::int64_t ids_begin = 0;         ///< the step's ids: src[ids_begin, ids_end)
  std::int64_t ids_end = 0;
  const std::int32_t* drawn = nullptr;  ///< the previous forward's draws (null: none)
  std::int64_t drawn_rows = 0;          ///< entries of `drawn`
  bool inlined = false;                 ///< the plan is inline_plan[0, n), not src's
  alignas(16) std::int32_t inline_plan[plan_inline_capacity] = {};
};

/// `dst[i] = src[i]` for i < n, except that an id (ids_begin <= i < ids_end)
/// of -2 - r with r < drawn_rows is the loopback of row r: `drawn[r]` is
/// written instead (the host writes no other id below -1). One launch for
/// what `cudaMemcpyAsync` plus `loopback_ids` do in two stream operations.
/// cudaErrorInvalidValue for null pointers with n > 0 (src may be null when
/// inlined), an inlined plan over plan_inline_capacity or a bad id range.
[[nodiscard]] cudaError_t upload_plan(const plan_upload_params& p, cudaStream_t stream);

/// For a plan kernel captured into a graph: sets node `node` of `exec` (the
/// graph node an `upload_plan` launch captured) to copy `p` on the graph's
/// next launches, the grid sized for `p.n` as `upload_plan` sizes it. The
/// same checks as `upload_plan`; n 0 is refused (a captured node runs).
[[nodiscard]] cudaError_t set_upload_plan_node(cudaGraphExec_t exec, cudaGraphNode_t node,
                                               const plan_upload_params& p);

}  // namespace mstar::kernels::cuda
