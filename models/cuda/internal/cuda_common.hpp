#pragma once

// What the CUDA model backends (Nemotron-H, Qwen3.5) share: device weight
// matrices, grow-only work buffers, a GEMM input in f32 or bf16, the
// per-forward slot of the launch / finish protocol and the decode graphs'
// owner. Only models/cuda/*.cpp include this, in CUDA builds.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

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

// A device matrix [rows, cols] in the weights' dtype: its own buffer, or
// (`borrowed`) a run of another matrix's rows, valid while that one lives.
struct device_matrix {
  kc::device_buffer buffer;
  std::int64_t rows = 0, cols = 0;
  const void* borrowed = nullptr;

  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return borrowed != nullptr ? static_cast<const T*>(borrowed) : buffer.as<const T>();
  }
};

// Rows [first, first + count) of `m`, whose elements are `elem` bytes, as a
// matrix that borrows them.
[[nodiscard]] inline device_matrix rows_of(const device_matrix& m, std::int64_t first,
                                           std::int64_t count, std::size_t elem) {
  device_matrix v;
  v.rows = count;
  v.cols = m.cols;
  v.borrowed = m.as<std::byte>() + static_cast<std::size_t>(first * m.cols) * elem;
  return v;
}

// Attention's q, k and v as one matrix [q_rows + 2 kv_rows, K] (host
// weights stacked in that order, uploaded by `upload`), each borrowing its
// rows of it, so a one-token step projects all three in one product.
template <class Upload>
[[nodiscard]] result<void> upload_qkv(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, std::int64_t q_rows,
                                      std::int64_t kv_rows, mstar::dtype dtype, Upload&& upload,
                                      device_matrix& qkv, device_matrix& dq, device_matrix& dk,
                                      device_matrix& dv) {
  std::vector<float> stacked;
  stacked.reserve(q.size() + k.size() + v.size());
  for (const std::vector<float>* part : {&q, &k, &v})
    stacked.insert(stacked.end(), part->begin(), part->end());
  auto up = upload(stacked, q_rows + 2 * kv_rows);
  if (!up)
    return up.error();
  qkv = std::move(*up);
  const std::size_t elem = mstar::size_of(dtype);
  dq = rows_of(qkv, 0, q_rows, elem);
  dk = rows_of(qkv, q_rows, kv_rows, elem);
  dv = rows_of(qkv, q_rows + kv_rows, kv_rows, elem);
  return {};
}

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
  /// With `f32`, bf16 weights and one row (a folded batch-1 step): the GEMV
  /// rounds the f32 row into its input itself, activated by `act` where set
  /// (times `up`'s row then), instead of a to_bf16 / activate launch before
  /// it (kernels::cuda::activation_linear_bf16).
  bool fold_f32 = false;
  std::optional<kernels::activation> act{};
  const float* up = nullptr;
  /// With `norm_of` (not `gate`): the row is the embedding `embed_table`
  /// [embed_rows, K] of token `*embed_ids`, which the GEMV looks up and
  /// writes to `embed_out` (`norm_of`'s memory) itself
  /// (kernels::cuda::embedding_fold): a batch-1 step's first layer, with no
  /// embedding launch before it.
  const std::int32_t* embed_ids = nullptr;
  const float* embed_table = nullptr;
  std::int64_t embed_rows = 0;
  float* embed_out = nullptr;
};

// An A/B switch read when a model is made: `name`=1 turns it on, =0 off;
// unset (or anything else) leaves the model's own default.
[[nodiscard]] inline bool switch_on(const char* name, bool by_default) {
  const char* e = std::getenv(name);
  const std::string_view v = e != nullptr ? e : "";
  return v == "1" ? true : v == "0" ? false : by_default;
}

// Whether a model made now folds its batch-1 norms into its GEMVs:
// `MSTAR_FUSED_NORM=0` turns the fold off (A/B runs), anything else keeps it.
[[nodiscard]] inline bool fused_norms_enabled() {
  return switch_on("MSTAR_FUSED_NORM", true);
}

// The batch-1 folds of sessions 42 and 43 (bench/results/session43-calls/:
// each measured on an H100 against its launches, tokens the same). Each
// model passes its measured default: Nemotron-H takes all five; Qwen3.5
// takes the lookup and leaves the conv and argmax folds off (its step was
// ~10 us slower with each).
//
// Whether a model made now folds, in its batch-1 steps, each recurrent
// layer's causal conv step into the in_proj GEMV before it
// (kernels::cuda::conv_step_fold; `MSTAR_CONV_FOLD`).
[[nodiscard]] inline bool conv_fold_enabled(bool by_default) {
  return switch_on("MSTAR_CONV_FOLD", by_default);
}

// Whether a model made now looks its batch-1 steps' token up in the first
// layer's GEMVs (kernels::cuda::embedding_fold) instead of an embedding
// launch (`MSTAR_EMBED_FOLD`).
[[nodiscard]] inline bool embed_fold_enabled(bool by_default) {
  return switch_on("MSTAR_EMBED_FOLD", by_default);
}

// Whether a recurrent layer's in_proj takes its conv step in (conv_step_fold)
// in this step: the fold is on, one decode row of one token, the projection's
// norm folded (not the gated form) and a conv width the fold takes.
[[nodiscard]] inline bool conv_fold_takes(bool enabled, bool decode, std::size_t rows,
                                          std::int64_t tokens, const gemm_input& in,
                                          const kernels::conv_weights& w) {
  return enabled && decode && rows == 1 && tokens == 1 && in.norm_of != nullptr &&
         in.gate == nullptr && w.width <= kc::conv_step_fold_max_width;
}

// Whether a model made now runs, in its batch-1 steps, the MLP's activation
// in the up projection's GEMV epilogue (kernels::cuda::
// rms_norm_linear_bf16_params::out_activation), so the down projection is a
// plain GEMV of that bf16 row (`MSTAR_MLP_EPILOGUE`).
[[nodiscard]] inline bool mlp_epilogue_enabled(bool by_default) {
  return switch_on("MSTAR_MLP_EPILOGUE", by_default);
}

// Whether a model made now draws its batch-1 greedy steps' token in the LM
// head's GEMV (kernels::cuda::argmax_fold) instead of an argmax launch after
// it (`MSTAR_ARGMAX_FOLD`).
[[nodiscard]] inline bool argmax_fold_enabled(bool by_default) {
  return switch_on("MSTAR_ARGMAX_FOLD", by_default);
}

// The argmax fold's meeting place (kernels::cuda::argmax_fold_state), zeroed
// here on `stream` (before any head that uses it); every launch leaves it
// zero again. One a model: its forwards run on that one stream, so no two
// heads use it at once.
[[nodiscard]] inline result<kc::device_buffer> make_argmax_state(cudaStream_t stream) {
  auto b = kc::device_buffer::make(sizeof(kc::argmax_fold_state));
  if (!b)
    return b.error();
  if (auto ok = kc::check(cudaMemsetAsync(b->data(), 0, sizeof(kc::argmax_fold_state), stream),
                          "argmax fold state");
      !ok)
    return ok.error();
  return b;
}

// Whether a model made now runs, in its batch-1 decode steps, Mamba-2's
// gated norm of the SSD output in the SSD update
// (kernels::cuda::ssd_update_gated_norm), so out_proj is a plain GEMV of a
// bf16 row instead of the gated form (`MSTAR_SSD_NORM_FOLD`). Nemotron-H
// takes it: its 0.56B's step 505 us against 521 (session 46, H100); at 16
// and 64 rows the fold's blocks of a head lost (986 / 1784 us against 904 /
// 1553), so more rows keep the two launches.
[[nodiscard]] inline bool ssd_norm_fold_enabled(bool by_default) {
  return switch_on("MSTAR_SSD_NORM_FOLD", by_default);
}

// Both models' set-up of the argmax fold when one is made: `on` as
// argmax_fold_enabled says (the model's default `by_default`), and where
// on, `state` made on the model's stream.
[[nodiscard]] inline result<void> set_up_argmax_fold(bool by_default, bool& on,
                                                     kc::device_buffer& state,
                                                     cudaStream_t stream) {
  on = argmax_fold_enabled(by_default);
  if (!on)
    return {};
  auto made = make_argmax_state(stream);
  if (!made)
    return made.error();
  state = std::move(*made);
  return {};
}

// The RMS form's operands for `in` (norm_of set, no gate) times `w`, the
// token lookup folded in where `in` asks for it; the caller sets the output.
[[nodiscard]] inline kc::rms_norm_linear_bf16_params rms_linear_params(const gemm_input& in,
                                                                       std::int64_t t,
                                                                       const device_matrix& w) {
  kc::rms_norm_linear_bf16_params p;
  p.x = kernels::matrix(in.norm_of, t, w.cols);
  p.norm_weight = kernels::vector(in.norm_weight, w.cols);
  p.eps = in.eps;
  if (in.embed_ids != nullptr) {
    p.embed =
        kc::embedding_fold{kernels::vector(in.embed_ids, 1),
                           kernels::matrix(in.embed_table, in.embed_rows, w.cols), in.embed_out};
  }
  p.weight = kernels::matrix(w.as<std::uint16_t>(), w.rows, w.cols);
  p.weight_static = true;  // model weights: uploaded at load
  return p;
}

// `out_bf16[t, N] = fn(rms_norm(in.norm_of) W^T)`, rounded to bf16 as
// activate rounds it (the RMS form's activation epilogue; bf16 weights, one
// row): an MLP's up projection writing its down projection's input.
[[nodiscard]] inline cudaError_t activated_folded_linear(const gemm_input& in, std::int64_t t,
                                                         const device_matrix& w,
                                                         kernels::activation fn,
                                                         std::uint16_t* out_bf16,
                                                         cudaStream_t stream) {
  if (in.norm_of == nullptr || in.gate != nullptr || in.embed_ids != nullptr)
    return cudaErrorInvalidValue;
  auto p = rms_linear_params(in, t, w);
  p.out_bf16 = kernels::matrix(out_bf16, t, w.rows);
  p.out_activation = fn;
  return kc::rms_norm_linear_bf16(p, stream);
}

// Whether a model made now stores, in its batch-1 steps, an attention
// layer's new K and V in their page from the fused q / k / v GEMV
// (kernels::cuda::kv_append_fold) instead of an append_kv launch after it
// (`MSTAR_KV_APPEND_FOLD`).
[[nodiscard]] inline bool append_fold_enabled(bool by_default) {
  return switch_on("MSTAR_KV_APPEND_FOLD", by_default);
}

// The RMS form's operands for one row `in` (norm_of set, no gate, no
// lookup) times `w` into `out_rows` [1, N] f32, for a fold to join; false
// where `in` is not such a row.
[[nodiscard]] inline bool one_row_rms_params(const gemm_input& in, const device_matrix& w,
                                             float* out_rows, kc::rms_norm_linear_bf16_params& p) {
  if (in.norm_of == nullptr || in.gate != nullptr || in.embed_ids != nullptr)
    return false;
  p = rms_linear_params(in, 1, w);
  p.out_f32 = kernels::matrix(out_rows, 1, w.rows);
  return true;
}

// (The head on other GEMV entries, the same bits, session 56's
// MSTAR_GEMV_HEAD_VARIANT, removed: on an H100 the 0.56B's batch-1 step took
// 470.3 / 471.7 us on entry 1 and 477.3 / 477.6 on entry 3 against the
// rule's entry 5 at 470.7 / 472.6; bench/results/session56-calls/, call1.)
// `out_rows[1, N] = rms_norm(in.norm_of) W^T` and its greedy draw into
// `draws[0]` (the argmax fold; bf16 weights, one row): a batch-1 greedy
// step's LM head with no argmax launch after it. `state`:
// make_argmax_state's.
[[nodiscard]] inline cudaError_t head_with_argmax(const gemm_input& in, const device_matrix& w,
                                                  float* out_rows, std::int32_t* draws,
                                                  kc::device_buffer& state, cudaStream_t stream) {
  kc::rms_norm_linear_bf16_params p;
  if (!one_row_rms_params(in, w, out_rows, p))
    return cudaErrorInvalidValue;
  p.argmax = kc::argmax_fold{draws, state.as<kc::argmax_fold_state>()};
  return kc::rms_norm_linear_bf16(p, stream);
}

// `out_rows[1, N] = rms_norm(in.norm_of) W^T` with the K and V part of the
// row stored in the paged arena too (the KV append fold; bf16 weights, one
// decode row): a batch-1 step's fused q / k / v product with no append_kv
// launch after it.
[[nodiscard]] inline cudaError_t qkv_with_append(const gemm_input& in, const device_matrix& w,
                                                 float* out_rows, const kc::kv_append_fold& append,
                                                 cudaStream_t stream) {
  kc::rms_norm_linear_bf16_params p;
  if (!one_row_rms_params(in, w, out_rows, p))
    return cudaErrorInvalidValue;
  p.append = append;
  return kc::rms_norm_linear_bf16(p, stream);
}

// A step's token lookup, `h[t] = table[ids[t]]` ([vocab, hid] f32 rows), as
// both models launch it where it is not folded.
[[nodiscard]] inline cudaError_t token_lookup(const std::int32_t* ids, std::int64_t t,
                                              const float* table, std::int64_t vocab,
                                              std::int64_t hid, float* h, cudaStream_t stream) {
  return kc::embedding(
      {kernels::vector(ids, t), kernels::matrix(table, vocab, hid), kernels::matrix(h, t, hid)},
      stream);
}

// The same lookup folded into the first layer's GEMV input `in` (its
// norm_of is h): embed_fold_enabled's batch-1 steps.
inline void fold_token_lookup(gemm_input& in, const std::int32_t* ids, const float* table,
                              std::int64_t vocab, float* h) {
  in.embed_ids = ids;
  in.embed_table = table;
  in.embed_rows = vocab;
  in.embed_out = h;
}

// Whether a model made now has its argmax / sampling write each forward's
// draws straight into the forward's slot (`drawn`), where the download and
// the next forward's loopback read them, so no device-to-device copy runs
// after each step (a copy-engine operation between two chained graphs).
// `MSTAR_DIRECT_DRAWS=0`: they go to the shared buffer and are copied
// (A/B runs). Direct, a decode graph is captured per (rows, slot).
[[nodiscard]] inline bool direct_draws_enabled() {
  return switch_on("MSTAR_DIRECT_DRAWS", true);
}

// Whether a model made now projects a one-token step's q, k and v in one
// product over their concatenated rows (`MSTAR_QKV_FUSED=0`: three, for
// A/B runs; the weights are concatenated either way).
[[nodiscard]] inline bool fused_qkv_enabled() {
  return switch_on("MSTAR_QKV_FUSED", true);
}

// The decode graph for `rows` rows launched from forward slot `slot` of
// `slots`: one a row count, or one a (row count, slot) with direct draws
// (each slot's graph writes its own `drawn`).
[[nodiscard]] inline std::int64_t graph_key(std::size_t rows, std::size_t slot, std::size_t slots,
                                            bool direct) {
  return static_cast<std::int64_t>(direct ? rows * slots + slot : rows);
}

// Whether a model made now folds, in its batch-1 steps, an f32 row's
// activation (`act`: the MLP's; `MSTAR_ACT_FOLD=0` turns it off) or its
// rounding to bf16 (`bf16`: attention's output; `MSTAR_BF16_FOLD=0`) into
// the GEMV that takes the row; off, the activate / to_bf16 launch runs
// before it (A/B runs).
struct f32_folds {
  bool act = true;
  bool bf16 = true;
};
[[nodiscard]] inline f32_folds f32_folds_enabled() {
  return {switch_on("MSTAR_ACT_FOLD", true), switch_on("MSTAR_BF16_FOLD", true)};
}

// The GEMV's weight and output operands as every model projection sets
// them: `w` bf16 and uploaded at load, `out_rows` [t, N] f32, added onto
// when `accumulate`.
template <class Params>
void set_weight_and_output(Params& p, std::int64_t t, const device_matrix& w, float* out_rows,
                           bool accumulate) {
  p.weight = kernels::matrix(w.as<std::uint16_t>(), w.rows, w.cols);
  p.weight_static = true;  // model weights: uploaded at load
  p.out_f32 = kernels::matrix(out_rows, t, w.rows);
  p.accumulate = accumulate;
}

// The f32 fold's operands: `in` (fold_f32 set) as activation_linear_bf16 reads them.
[[nodiscard]] inline kc::activation_linear_bf16_params activation_linear_params(
    const gemm_input& in, std::int64_t t, const device_matrix& w, float* out_rows,
    bool accumulate) {
  kc::activation_linear_bf16_params p;
  p.x = kernels::matrix(in.f32, t, w.cols);
  p.fn = in.act;
  if (in.up != nullptr)
    p.up = kernels::matrix(in.up, t, w.cols);
  set_weight_and_output(p, t, w, out_rows, accumulate);
  return p;
}

// Whether the f32 fold takes `in` (fold_f32 set, bf16 weights) and computes
// what activate (or to_bf16) then the GEMV computes, bit for bit: one row,
// shapes activate's quad form and the GEMV take. Elsewhere the caller
// launches the two.
[[nodiscard]] inline bool f32_fold_fits(const gemm_input& in, std::int64_t t,
                                        const device_matrix& w, float* out_rows, bool accumulate) {
  return in.fold_f32 && in.f32 != nullptr &&
         kc::activation_linear_bf16_fits(activation_linear_params(in, t, w, out_rows, accumulate));
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
  set_weight_and_output(p, t, w, out_rows, accumulate);
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
  return switch_on("MSTAR_GATED_FOLD", true) && kc::gated_rms_norm_warp_form() &&
         kc::gated_rms_norm_linear_bf16_fits(gated_linear_params(in, t, w, out_rows, accumulate));
}

// `out_rows[t, N] = rms_norm(in.norm_of) W^T` (with `in.gate`: the gated
// norm), added onto out_rows when `accumulate`, in one GEMV
// (kernels::cuda::rms_norm_linear_bf16 / gated_rms_norm_linear_bf16; bf16
// weights, one row): both models' batch-1 fold of a norm into the
// projection after it.
// With `conv` (the RMS form only), the kernel also runs that conv step on
// its outputs.
[[nodiscard]] inline cudaError_t folded_linear(const gemm_input& in, std::int64_t t,
                                               const device_matrix& w, float* out_rows,
                                               bool accumulate, cudaStream_t stream,
                                               std::optional<kc::conv_step_fold> conv = {}) {
  if (in.gate != nullptr) {
    if (conv || in.embed_ids != nullptr)
      return cudaErrorInvalidValue;
    return kc::gated_rms_norm_linear_bf16(gated_linear_params(in, t, w, out_rows, accumulate),
                                          stream);
  }
  auto p = rms_linear_params(in, t, w);
  p.conv = conv;
  set_weight_and_output(p, t, w, out_rows, accumulate);
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

// A launch's outcome and what it was, for the caller's `check` (which adds
// the model's name): the first launch that failed, else the last one.
struct launch_outcome {
  cudaError_t err = cudaSuccess;
  std::string_view what;
};

// `out_rows[t, N] = in[t, K] W^T` (`+=` when `accumulate`: bf16 weights
// only), as both models launch it: a norm folded into the GEMV
// (`in.norm_of`), an f32 row's activation or rounding folded where that
// fits (`in.fold_f32`), cublasSgemm with f32 weights, or the bf16 product
// reading `in.bf16`, or `in.f32` rounded into the bf16 scratch `xb` first.
[[nodiscard]] inline launch_outcome launch_linear(kc::blas_handle& blas, mstar::dtype dtype,
                                                  const work_buffer& xb, const gemm_input& in,
                                                  std::int64_t t, const device_matrix& w,
                                                  float* out_rows, bool accumulate,
                                                  cudaStream_t s) {
  if (in.norm_of != nullptr) {
    return {folded_linear(in, t, w, out_rows, accumulate, s),
            in.gate != nullptr ? "gated_rms_norm_linear_bf16" : "rms_norm_linear_bf16"};
  }
  if (in.fold_f32 && dtype == mstar::dtype::bfloat16) {
    if (f32_fold_fits(in, t, w, out_rows, accumulate)) {
      return {
          kc::activation_linear_bf16(activation_linear_params(in, t, w, out_rows, accumulate), s),
          "activation_linear_bf16"};
    }
    // Unfolded, the row as it is rounds below; an activation cannot be left out.
    if (in.act)
      return {cudaErrorInvalidValue, "linear: an activation fold that does not fit"};
  }
  if (dtype == mstar::dtype::float32) {
    if (accumulate)
      return {cudaErrorInvalidValue, "linear: accumulating needs bf16 weights"};
    return {kc::linear(blas,
                       {kernels::matrix(in.f32, t, w.cols),
                        kernels::matrix(w.as<float>(), w.rows, w.cols),
                        {},
                        kernels::matrix(out_rows, t, w.rows)},
                       s),
            "linear"};
  }
  const std::uint16_t* x16 = in.bf16;
  if (x16 == nullptr) {
    auto* xb16 = xb.as<std::uint16_t>();
    if (const cudaError_t err = kc::to_bf16(in.f32, xb16, t * w.cols, s); err != cudaSuccess)
      return {err, "to_bf16"};
    x16 = xb16;
  }
  kc::linear_bf16_params p;
  p.x = kernels::matrix(x16, t, w.cols);
  set_weight_and_output(p, t, w, out_rows, accumulate);
  return {kc::linear_bf16(blas, p, s), "linear_bf16"};
}

// A recurrent mixer's in_proj, `out[t, N] = in W^T`, then its causal conv
// over the N-wide rows' features [conv.first, conv.first + C) into
// conv.out, as both models run them: one GEMV with the conv step folded in
// where conv_fold_takes (`fold_on`: the model's switch), else the product
// (launch_linear) and the conv's own launch (one decode token a row, or
// the rows `cu` delimits). conv's slot_indices and has_state span the rows.
[[nodiscard]] inline launch_outcome in_proj_and_conv(
    kc::blas_handle& blas, mstar::dtype dtype, const work_buffer& xb, bool fold_on, bool decode,
    const gemm_input& in, std::int64_t t, const device_matrix& w, float* out,
    const kc::conv_step_fold& conv, std::span<const std::int32_t> cu, cudaStream_t s) {
  const std::size_t rows = conv.slot_indices.size();
  if (conv_fold_takes(fold_on, decode, rows, t, in, conv.w))
    return {folded_linear(in, t, w, out, false, s, conv),
            "rms_norm_linear_bf16 with the conv step"};
  const launch_outcome product = launch_linear(blas, dtype, xb, in, t, w, out, false, s);
  if (product.err != cudaSuccess)
    return product;
  const float* x = out + conv.first;
  const cudaError_t e =
      decode ? kc::causal_conv_update({conv.w, x, w.rows, conv.out, static_cast<std::int32_t>(rows),
                                       conv.state, conv.slot_indices, conv.has_state},
                                      s)
             : kc::causal_conv_varlen(
                   {conv.w, x, w.rows, conv.out, cu, conv.state, conv.slot_indices, conv.has_state},
                   s);
  return {e, "causal conv"};
}

// An instantiated graph, destroyed with its owner.
struct graph_exec_deleter {
  void operator()(CUgraphExec_st* g) const noexcept { (void)cudaGraphExecDestroy(g); }
};

// A captured graph, destroyed with its owner.
struct graph_deleter {
  void operator()(CUgraph_st* g) const noexcept { (void)cudaGraphDestroy(g); }
};

// One launched forward's own memory (slot = ticket % 2), reused by the
// forward two launches later, which starts only after this one finished:
// the pinned plan and sampling settings its uploads read, the pinned ids or
// logits its downloads write (valid once `done` completed), and a device
// copy of its draws for the next forward's loopback rows (the greedy buffer
// may move when that forward reserves, the copy does not; with direct
// draws the forward's argmax or sampling writes it, nothing is copied).
struct forward_slot {
  kc::pinned_buffer plan, settings, ids, logits;
  work_buffer drawn;
  kc::event done;      // recorded after the forward's last download
  kc::event computed;  // side downloads: recorded after the draws, before their download
  std::uint64_t ticket = 0;
  bool busy = false;
  std::size_t n_ids = 0, n_logits = 0;  // what the downloads fill (0: not asked)
  std::uint64_t timed = 0;              // the timeline generation it recorded into; 0: none
};

// Side downloads (`MSTAR_SIDE_DOWNLOAD=1` / `0`; unset: `by_default`, each
// model's own): the second stream a forward's draws cross to pinned memory
// on, or none (a stream whose get() is null).
[[nodiscard]] inline result<kc::stream> side_stream(bool by_default) {
  if (!switch_on("MSTAR_SIDE_DOWNLOAD", by_default))
    return kc::stream{};
  return kc::stream::make();
}

// Queues the download of a forward's draws (`bytes` of ids) into the slot's
// pinned `ids`, which the caller reserved: first their copy from the shared
// `greedy` into the slot's `drawn` on `s`, unless the draws are `direct`
// (written there already); then the download, on `s`, or, with `copies`
// (side downloads), on `copies` behind the slot's `computed` event recorded
// on `s`, so that the next forward's launches do not queue behind it.
// Returns the stream the slot's `done` must be recorded on. `check` is the
// model's (it names the model in an error).
template <class Check>
[[nodiscard]] result<cudaStream_t> download_draws(forward_slot& slot, const work_buffer& greedy,
                                                  bool direct, std::size_t bytes, cudaStream_t s,
                                                  cudaStream_t copies, const Check& check) {
  if (!direct) {
    if (auto ok = check(cudaMemcpyAsync(slot.drawn.buffer.data(), greedy.buffer.data(), bytes,
                                        cudaMemcpyDeviceToDevice, s),
                        "sampled ids copy");
        !ok)
      return ok.error();
  }
  cudaStream_t on = s;
  if (copies != nullptr) {
    if (!slot.computed.get()) {
      auto made = kc::event::make(false);
      if (!made)
        return made.error();
      slot.computed = std::move(*made);
    }
    if (auto ok = slot.computed.record(s); !ok)
      return ok.error();
    if (auto ok = check(cudaStreamWaitEvent(copies, slot.computed.get(), 0), "side download wait");
        !ok)
      return ok.error();
    on = copies;
  }
  if (auto ok = check(cudaMemcpyAsync(slot.ids.data(), slot.drawn.buffer.data(), bytes,
                                      cudaMemcpyDeviceToHost, on),
                      "sampled ids download");
      !ok)
    return ok.error();
  return on;
}

}  // namespace mstar::models::cuda_detail
