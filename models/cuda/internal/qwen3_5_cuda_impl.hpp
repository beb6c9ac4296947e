#pragma once

// The CUDA Qwen3.5's private state: device weights, work buffers, the
// step's plan layout and the launches of one step. Only
// models/cuda/qwen3_5_cuda*.cpp include this, in CUDA builds.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/launch.hpp"
#include "models/cuda/internal/cuda_common.hpp"
#include "models/cuda/qwen3_5_cuda.hpp"

namespace mstar::models {
namespace qwen_cuda {
using namespace cuda_detail;  // NOLINT(google-build-using-namespace): the shared parts

struct layer {
  qwen3_5_mixer mixer = qwen3_5_mixer::delta_net;
  std::int32_t sub_index = 0;
  kc::device_buffer in_norm, mlp_norm;                         // f32 [hidden]
  kc::device_buffer conv_w, dt_bias, a_log, gnorm;             // f32
  kc::device_buffer q_norm, k_norm;                            // f32 [D]
  device_matrix in_proj, out_proj, q, k, v, o, gate_up, down;  // gate_up: [2 inter, hidden]
  // Attention: q (with its gate), k and v borrow their rows of one matrix,
  // so a one-token step projects all three in one product.
  device_matrix qkv;
};

// Where each index array of a step sits in the plan buffer (int32 units);
// every offset depends only on (tokens, rows, the KV index capacity), so a
// decode graph captured for R rows reads the same addresses every step.
struct step_layout {
  std::size_t ids = 0, cu = 0, last = 0, pos = 0, qo = 0, kvp = 0, lpl = 0, dp = 0, dop = 0,
              slots = 0, has = 0, loop = 0, kvi = 0, total = 0;
  std::size_t n_dp = 0, n_kvi = 0;
};

}  // namespace qwen_cuda

struct qwen3_5_cuda::impl {
  using work_buffer = cuda_detail::work_buffer;
  using forward_slot = cuda_detail::forward_slot;
  using device_matrix = cuda_detail::device_matrix;
  using gemm_input = cuda_detail::gemm_input;
  struct graph_entry {
    std::unique_ptr<CUgraphExec_st, cuda_detail::graph_exec_deleter> exec;
    std::uint64_t buffers = 0;  // the work buffers' generation it was captured against
  };

  int device = 0;
  std::string name;
  mstar::dtype dtype = mstar::dtype::bfloat16;
  bool graphs = true;
  std::int64_t kv_pages = 0;
  kernels::cuda::stream stream;
  /// Side downloads (cuda_common.hpp's side_stream; on unless
  /// `MSTAR_SIDE_DOWNLOAD=0`): the stream a forward's draws cross to pinned
  /// memory on, behind the slot's `computed` event; null without them.
  kernels::cuda::stream copies;
  kernels::cuda::blas_handle blas;
  qwen3_5_config config;
  kernels::cuda::device_buffer embeddings, norm, inv_freq;  // f32
  device_matrix lm_head;
  std::vector<qwen_cuda::layer> layers;
  // Work buffers, sized per step (`reserve`): each holds exactly what its
  // writers put there for the step's tokens, none doubles as another's.
  work_buffer h, x, out, proj, conv, rule, qg, q, k, v, o, inter, act, xb, last, logits, plan,
      greedy;
  work_buffer split, settings;
  // The chunked delta rule's scratch (prefill steps with bf16 weights).
  work_buffer rule_scratch;
  std::uint64_t buffers_generation = 0;
  std::array<forward_slot, nemotron_h_backend::max_outstanding> forwards;
  std::uint64_t next_ticket = 0;
  std::size_t outstanding = 0;
  std::size_t last_drawn_rows = 0;
  const work_buffer* last_drawn = nullptr;
  // Keyed by cuda_detail::graph_key.
  std::map<std::int64_t, graph_entry> graph_by_rows;
  /// Batch-1 decode steps with bf16 weights fold each norm into the GEMVs
  /// after it and each block's last projection's add into its GEMV
  /// (`MSTAR_FUSED_NORM=0`: the separate add_rms_norm launches, for A/B).
  bool fused_norms = true;
  /// In those steps, the MLP's SwiGLU folds into the down GEMV
  /// (cuda_common.hpp's f32_folds; the attention output is bf16 already).
  cuda_detail::f32_folds f32_folds;
  /// In those steps, the first block's first GEMV looks the token up itself
  /// (cuda_common.hpp's embed_fold_enabled; on).
  bool embed_fold = false;
  /// In those steps, each delta-net layer's conv step runs in its in_proj
  /// GEMV (cuda_common.hpp's conv_fold_enabled; off unless switched on).
  bool conv_fold = false;
  /// In those steps, a greedy row's draw runs in the LM head's GEMV
  /// (cuda_common.hpp's argmax_fold_enabled; off unless switched on), meeting in
  /// `argmax_state` (made with the model when the fold is on).
  bool argmax_fold = false;
  kernels::cuda::device_buffer argmax_state;
  /// Argmax and sampling write a forward's draws into its slot's `drawn`
  /// (cuda_common.hpp's direct_draws_enabled), not `greedy` then a copy.
  bool direct_draws = true;
  /// One-token steps project q, k and v in one product (fused_qkv_enabled).
  bool fused_qkv = true;
  /// Where the forward being enqueued has its argmax / sampling write its
  /// draws: its slot's `drawn` (direct draws) or `greedy`.
  std::int32_t* draws_to = nullptr;
  /// Where a block (a layer's mixer or its MLP) reads its input (`in`) and
  /// writes its output (`out`, added onto it when `accumulate`).
  struct layer_io {
    gemm_input in;
    float* out = nullptr;
    bool accumulate = false;
  };

  ~impl();
  [[nodiscard]] result<void> check(cudaError_t err, std::string_view what) const {
    if (err == cudaSuccess)
      return {};
    return kernels::cuda::cuda_error(err, what).with_context(name);
  }
  [[nodiscard]] result<void> reserve_buffer(work_buffer& w, std::size_t bytes,
                                            bool graphs_read = true);
  [[nodiscard]] static result<void> reserve_pinned(kernels::cuda::pinned_buffer& b,
                                                   std::size_t bytes);
  [[nodiscard]] result<kernels::cuda::device_buffer> floats(const std::vector<float>& w) const;
  [[nodiscard]] result<device_matrix> weights(const std::vector<float>& w, std::int64_t rows,
                                              std::int64_t cols) const;
  [[nodiscard]] result<void> upload(const qwen3_5_config& c, const qwen3_5_host_weights& w);
  [[nodiscard]] result<void> reserve(std::int64_t tokens, std::int64_t rows, std::size_t plan_ints);

  // One step's launches (what a decode graph captures); the layers.
  [[nodiscard]] result<void> launch_step(const qwen3_5_step& st, const qwen_cuda::step_layout& L,
                                         bool argmax);
  [[nodiscard]] result<void> delta_net(const qwen_cuda::layer& l, const layer_io& io,
                                       const qwen3_5_step& st, const qwen_cuda::step_layout& L);
  [[nodiscard]] result<void> attention(const qwen_cuda::layer& l, const layer_io& io,
                                       const qwen3_5_step& st, const qwen_cuda::step_layout& L,
                                       const kernels::kv_page_table& table);
  // The delta nets' shape (no weights), and whether prefill steps run the
  // chunked delta rule (bf16 weights; its TF32 products would cost float32
  // weights their parity with the CPU).
  [[nodiscard]] kernels::gated_delta_weights delta_shape() const;
  [[nodiscard]] bool chunked_delta_rule() const { return dtype != mstar::dtype::float32; }
  [[nodiscard]] result<void> mlp(const qwen_cuda::layer& l, const layer_io& io,
                                 std::int64_t tokens);
  // `out_rows[t, N] = in[t, K] W^T` (`+=` when `accumulate`: bf16 weights
  // only); `in.norm_of`: one row the GEMV norms itself (bf16 weights).
  [[nodiscard]] result<void> linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                    float* out_rows, bool accumulate = false);
  [[nodiscard]] result<void> add_norm(float* residual, const float* delta, std::int64_t rows,
                                      const kernels::cuda::device_buffer& weight, float* f32_out);
  [[nodiscard]] result<void> sample(std::span<const row_sampling> rows, forward_slot& slot);
  // Where a GEMM's input goes: `f32` with f32 weights, the bf16 scratch otherwise.
  [[nodiscard]] gemm_input staged(const float* f32) const {
    if (dtype == mstar::dtype::float32)
      return {f32, nullptr};
    return {nullptr, xb.as<const std::uint16_t>()};
  }
  [[nodiscard]] std::uint16_t* staged_bf16() const {
    return dtype == mstar::dtype::float32 ? nullptr : xb.as<std::uint16_t>();
  }
  // Queues forward `index`; nothing is waited for.
  [[nodiscard]] result<void> enqueue(std::size_t index, const qwen3_5_step& st, bool want_logits,
                                     std::span<const row_sampling> sampling,
                                     std::span<const std::int32_t> loopback);
};

}  // namespace mstar::models
