#pragma once

// What the CUDA model backends (Nemotron-H, Qwen3.5) share: device weight
// matrices, grow-only work buffers, a GEMM input in f32 or bf16, the
// per-forward slot of the launch / finish protocol and the decode graphs'
// owner. Only models/cuda/*.cpp include this, in CUDA builds.

#include <cstdint>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <string_view>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/math.hpp"

namespace mstar::models::cuda_detail {
namespace kc = kernels::cuda;

// `what` ("the CUDA model", "the CUDA vision tower") runs bf16 or f32 weights only.
[[nodiscard]] inline result<void> check_weights_dtype(mstar::dtype dtype, std::string_view what) {
  if (dtype == mstar::dtype::bfloat16 || dtype == mstar::dtype::float32)
    return {};
  return make_error(
      errc::invalid_argument,
      fmt::format("{} runs bfloat16 or float32 weights, not {}", what, to_string(dtype)));
}

// Makes cuda:`device` current after checking it exists; `who` names the
// caller in a failed device query's context.
[[nodiscard]] inline result<void> select_device(int device, std::string_view who) {
  int count = 0;
  if (auto ok = kc::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !ok)
    return ok.error().with_context(who);
  if (device < 0 || device >= count) {
    return make_error(errc::invalid_argument,
                      fmt::format("cuda:{} does not exist ({} device(s) visible)", device, count));
  }
  return kc::check(cudaSetDevice(device), "cudaSetDevice");
}

// A device matrix [rows, cols] in the weights' dtype.
struct device_matrix {
  kc::device_buffer buffer;
  std::int64_t rows = 0, cols = 0;
};

// A GEMM's input rows: float32, or already bfloat16 (written there by the
// fused kernel before the GEMM). bf16 rows are read only with bf16 weights.
struct gemm_input {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  /// Or one f32 row whose RMS norm (with `norm_weight`, `eps`) the GEMV takes
  /// itself (kernels::cuda::rms_norm_linear_bf16): a batch-1 decode step.
  const float* norm_of = nullptr;
  const float* norm_weight = nullptr;
  float eps = 0.0F;
  /// With `norm_of`: Mamba-2's gated norm of it instead, `norm_of *
  /// silu(gate)` normed over groups of `group` channels
  /// (kernels::cuda::gated_rms_norm_linear_bf16); the gate's rows lie
  /// `gate_stride` floats apart (a view into the in_proj output).
  const float* gate = nullptr;
  std::int64_t gate_stride = 0;
  std::int64_t group = 0;
};

// Whether a model made now folds its batch-1 norms into its GEMVs:
// `MSTAR_FUSED_NORM=0` turns the fold off (A/B runs), anything else keeps it.
[[nodiscard]] inline bool fused_norms_enabled() {
  const char* e = std::getenv("MSTAR_FUSED_NORM");
  return e == nullptr || std::string_view{e} != "0";
}

// The gated fold's operands: `in` (a gate set) as gated_rms_norm_linear_bf16 reads them.
[[nodiscard]] inline kc::gated_rms_norm_linear_bf16_params gated_linear_params(
    const gemm_input& in, std::int64_t t, const device_matrix& w, float* out_rows,
    bool accumulate) {
  kc::gated_rms_norm_linear_bf16_params p;
  p.x = kernels::matrix(in.norm_of, t, w.cols);
  p.gate = {in.gate, {t, w.cols}, {in.gate_stride, 1}};
  p.norm_weight = kernels::vector(in.norm_weight, w.cols);
  p.group_size = in.group;
  p.eps = in.eps;
  p.weight = kernels::matrix(w.buffer.as<const std::uint16_t>(), w.rows, w.cols);
  p.weight_static = true;  // model weights: uploaded at load
  p.out_f32 = kernels::matrix(out_rows, t, w.rows);
  p.accumulate = accumulate;
  return p;
}

// Whether folded_linear takes the gated `in` and computes what
// gated_rms_norm then the GEMM computes, bit for bit: gated_rms_norm takes
// its warp form (whose code the GEMV shares) and the GEMV takes the shapes.
// Elsewhere the caller launches the two. `MSTAR_GATED_FOLD=0` keeps the two
// launches (A/B runs; read once a call, like the kernels' own switches).
[[nodiscard]] inline bool gated_fold_fits(const gemm_input& in, std::int64_t t,
                                          const device_matrix& w, float* out_rows,
                                          bool accumulate) {
  const char* e = std::getenv("MSTAR_GATED_FOLD");
  if (e != nullptr && std::string_view{e} == "0")
    return false;
  return kc::gated_rms_norm_warp_form() &&
         kc::gated_rms_norm_linear_bf16_fits(gated_linear_params(in, t, w, out_rows, accumulate));
}

// `out_rows[t, N] = rms_norm(in.norm_of) W^T` (with `in.gate`: the gated
// norm), added onto out_rows when `accumulate`, in one GEMV
// (kernels::cuda::rms_norm_linear_bf16 / gated_rms_norm_linear_bf16; bf16
// weights, one row): both models' batch-1 fold of a norm into the
// projection after it.
[[nodiscard]] inline cudaError_t folded_linear(const gemm_input& in, std::int64_t t,
                                               const device_matrix& w, float* out_rows,
                                               bool accumulate, cudaStream_t stream) {
  if (in.gate != nullptr)
    return kc::gated_rms_norm_linear_bf16(gated_linear_params(in, t, w, out_rows, accumulate),
                                          stream);
  kc::rms_norm_linear_bf16_params p;
  p.x = kernels::matrix(in.norm_of, t, w.cols);
  p.norm_weight = kernels::vector(in.norm_weight, w.cols);
  p.eps = in.eps;
  p.weight = kernels::matrix(w.buffer.as<const std::uint16_t>(), w.rows, w.cols);
  p.weight_static = true;  // model weights: uploaded at load
  p.out_f32 = kernels::matrix(out_rows, t, w.rows);
  p.accumulate = accumulate;
  return kc::rms_norm_linear_bf16(p, stream);
}

// A grow-only device buffer: `reserve_buffer` drains the stream before the
// old memory goes, so no queued kernel reads memory being freed.
struct work_buffer {
  kc::device_buffer buffer;
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return buffer.as<T>();
  }
};

// An instantiated graph, destroyed with its owner.
struct graph_exec_deleter {
  void operator()(CUgraphExec_st* g) const noexcept { (void)cudaGraphExecDestroy(g); }
};

// One launched forward's own memory (slot = ticket % 2), reused by the
// forward two launches later, which starts only after this one finished:
// the pinned plan and sampling settings its uploads read, the pinned ids or
// logits its downloads write (valid once `done` completed), and a device
// copy of its draws for the next forward's loopback rows (the greedy buffer
// may move when that forward reserves, the copy does not).
struct forward_slot {
  kc::pinned_buffer plan, settings, ids, logits;
  work_buffer drawn;
  kc::event done;  // recorded after the forward's last download
  std::uint64_t ticket = 0;
  bool busy = false;
  std::size_t n_ids = 0, n_logits = 0;  // what the downloads fill (0: not asked)
  std::uint64_t timed = 0;              // the timeline generation it recorded into; 0: none
};

}  // namespace mstar::models::cuda_detail
