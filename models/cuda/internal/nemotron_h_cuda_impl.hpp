#pragma once

// The CUDA Nemotron-H's private state: device weights, work buffers, the
// step's plan layout and the launches of one step. Only
// models/cuda/nemotron_h_cuda*.cpp include this, in CUDA builds.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/launch.hpp"
#include "models/cuda/internal/cuda_common.hpp"
#include "models/cuda/nemotron_h_cuda.hpp"
#include "models/nemotron_h_weights.hpp"

namespace mstar::models {
namespace cuda_detail {
namespace kc = kernels::cuda;

struct device_layer {
  layer_kind kind = layer_kind::mlp;
  std::int32_t sub_index = 0;
  kc::device_buffer norm, conv_w, conv_b, dt_bias, a_log, d, gnorm;  // f32
  device_matrix in_proj, out_proj, q, k, v, o, up, down;
  // Attention: q, k and v borrow their rows of one matrix, so a one-token
  // step projects all three in one product (a GEMV reads the weights once
  // in one launch where three launches each paid their ramp and tail).
  device_matrix qkv;
};

// Where each index array of a step sits in the plan buffer (int32 units).
// Every offset depends only on (tokens, rows, the KV index capacity), so a
// decode graph captured for R rows reads the same addresses every step.
// `loop` holds the loopback pairs (position in ids, previous row), room for
// every row; only the gather before the step reads it, never a graph.
struct step_layout {
  std::size_t ids = 0, cu = 0, last = 0, qo = 0, kvp = 0, lpl = 0, dp = 0, dop = 0, slots = 0,
              has = 0, loop = 0, kvi = 0, total = 0;
  std::size_t n_dp = 0, n_kvi = 0;
};

}  // namespace cuda_detail

namespace kc = kernels::cuda;
using cuda_detail::device_layer;
using cuda_detail::device_matrix;
using cuda_detail::forward_slot;
using cuda_detail::gemm_input;
using cuda_detail::step_layout;
using cuda_detail::work_buffer;

struct nemotron_h_cuda::impl {
  int device = 0;
  std::string name;
  mstar::dtype dtype = mstar::dtype::bfloat16;
  kc::stream stream;
  /// Side downloads (on unless `MSTAR_SIDE_DOWNLOAD=0`; session 44 on an
  /// H100: the 0.56B's batch-1 step 510.8-518.6 us against 534.3-537.1
  /// without): a forward's draws cross to pinned memory on this second
  /// stream, after an event on `stream`, so the next forward's upload and
  /// graph do not queue behind the copy. Null when off.
  kc::stream copies;
  /// Plan kernel (`MSTAR_PLAN_KERNEL=1`): the step's plan crosses in one
  /// kernel that reads the slot's pinned plan over the bus and writes the
  /// loopback draws in place (kernels/cuda/sampling.hpp's upload_plan), one
  /// stream operation where the upload and the gather are two. `2` (the
  /// default since session 48: 3 us a 0.56B batch-1 step on an H100 in
  /// three calls, bench/results/session48-calls/): in a decode graph that
  /// kernel is also the graph's first node, set to each step's plan before
  /// the launch (set_upload_plan_node), so no stream operation precedes the
  /// graph. `MSTAR_PLAN_KERNEL=0`: the upload and the gather.
  int plan_kernel = 2;
  /// Inline plans (`MSTAR_PLAN_INLINE=1`, opt-in: within 1 us of the
  /// defaults on H100s, the 0.56B at batch 1, session 52's three calls;
  /// not measured on an H200): a plan of at most kc::plan_inline_capacity
  /// ints travels in the plan kernel's own parameters (copied from the
  /// pinned plan on the host), so the kernel at the head of the step reads
  /// nothing over the bus.
  bool plan_inline = false;
  /// Early SSD state (`MSTAR_SSD_EARLY=1`, opt-in): a decode step's SSD
  /// update reads its slots and states before its chained wait
  /// (ssd_update_params::state_settled). They are settled there: they are
  /// written only by the step's upload and slot copies, and by this layer's
  /// update a step before, all done once the in_proj GEMV before the update
  /// has passed its own wait, which it does before it releases the update
  /// (the GEMVs' `late` or `last` release: kc::gemv_releases_after_wait;
  /// not `loads`, nor the default `wave`, under which the update reads them
  /// after its wait).
  bool ssd_early = false;
  kc::blas_handle blas;
  nemotron_h_config config;
  kc::device_buffer embeddings, norm_f;  // f32
  device_matrix lm_head;
  std::vector<device_layer> layers;
  // Work buffers, sized per step.
  work_buffer h, x, out, zxbcdt, xbc, y, q, k, v, o, inter, xb, last, logits, plan, greedy;
  work_buffer split;        // split-KV decode attention partials
  work_buffer ssd_scratch;  // the chunked SSD scan's workspace (prefill, bf16)
  work_buffer settings;     // per-row sampling settings, struct of arrays
  // Tensor parallelism (nemotron_h_cuda_parallel.cpp): the group (comm null:
  // the whole model), the LM head's part of each row padded to the common
  // chunk and every rank's parts gathered (device groups), or the same in
  // pinned host memory (host groups).
  nemotron_h_tensor_parallel tp;
  work_buffer tp_part, tp_gathered;
  kc::pinned_buffer tp_host_part, tp_host_gathered;
  std::uint64_t buffers_generation = 0;  // bumped whenever a work buffer moves
  // The forwards launched and not finished: forwards[ticket % 2]; the oldest is
  // next_ticket - outstanding.
  std::array<forward_slot, nemotron_h_backend::max_outstanding> forwards;
  std::uint64_t next_ticket = 0;
  std::size_t outstanding = 0;
  // The last launched forward's draws, what a loopback row may read: how
  // many rows it drew (0: it drew none, or its launch failed half-way) and
  // the device copy holding them.
  std::size_t last_drawn_rows = 0;
  const work_buffer* last_drawn = nullptr;
  // The device timeline (record_timeline): start and end events per slot,
  // the last finished forward's end (swapped in by finish, so a launch that
  // reuses its slot cannot overwrite it), and what was measured so far.
  struct timeline {
    std::array<kc::event, nemotron_h_backend::max_outstanding> start, end;
    kc::event prev_end;
    bool has_prev = false;
    std::uint64_t generation = 0;  // which forwards recorded into these events
    std::vector<device_step_time> steps;
  };
  std::unique_ptr<timeline> tl;  // null: not recording
  std::uint64_t timelines = 0;   // timelines started, the generations' source

  /// Batch-1 decode steps with bf16 weights fold each norm into the GEMV
  /// after it and each row-parallel projection's add into its GEMV
  /// (`MSTAR_FUSED_NORM=0`: the separate add_rms_norm launches, for A/B).
  bool fused_norms = true;
  /// In those steps, the MLP's activation and attention output's rounding
  /// fold into the GEMV after them (cuda_common.hpp's f32_folds).
  cuda_detail::f32_folds f32_folds;
  /// In those steps, each Mamba-2 layer's conv step runs in its in_proj
  /// GEMV (cuda_common.hpp's conv_fold_enabled).
  bool conv_fold = false;
  /// In those steps, the first layer's GEMVs look the token up themselves
  /// (cuda_common.hpp's embed_fold_enabled).
  bool embed_fold = false;
  /// In those steps, the MLP's activation runs in its up GEMV's epilogue
  /// (cuda_common.hpp's mlp_epilogue_enabled).
  bool mlp_epilogue = false;
  /// In those steps, a greedy row's draw runs in the LM head's GEMV
  /// (cuda_common.hpp's argmax_fold_enabled), meeting in
  /// `argmax_state` (made with the model when the fold is on).
  bool argmax_fold = false;
  kc::device_buffer argmax_state;
  /// In those steps, each attention layer's fused q / k / v GEMV stores its
  /// K and V in their page (cuda_common.hpp's append_fold_enabled), no
  /// append_kv launch after it.
  bool append_fold = false;
  /// Batch-1 decode steps run each Mamba-2 layer's gated norm in its SSD
  /// update (cuda_common.hpp's ssd_norm_fold_enabled).
  bool ssd_norm_fold = false;
  /// Argmax and sampling write a forward's draws into its slot's `drawn`
  /// (cuda_common.hpp's direct_draws_enabled), not `greedy` then a copy.
  bool direct_draws = true;
  /// One-token steps project q, k and v in one product (fused_qkv_enabled).
  bool fused_qkv = true;
  /// Where the forward being enqueued has its argmax / sampling write its
  /// draws: its slot's `drawn` (direct draws) or `greedy`.
  std::int32_t* draws_to = nullptr;
  /// Where a layer's mixer reads its input (`in`) and writes its output
  /// (`out`, added onto it when `accumulate`).
  struct layer_io {
    gemm_input in;
    float* out = nullptr;
    bool accumulate = false;
  };
  /// Prefill steps with bf16 weights scan long rows in chunks on tensor
  /// cores (TF32); f32 weights keep the exact sequential scan.
  [[nodiscard]] bool chunked_ssd() const { return dtype != mstar::dtype::float32; }
  /// `graphs_read`: captured graphs address this buffer, so moving it
  /// retires them.
  [[nodiscard]] result<void> reserve_buffer(work_buffer& w, std::size_t bytes,
                                            bool graphs_read = true) {
    if (w.buffer.size() >= bytes)
      return {};
    auto grown = kc::device_buffer::make(std::max(bytes, w.buffer.size() * 3 / 2));
    if (!grown)
      return grown.error().with_context("model work buffer");
    // The forward launched before this one may still read or write the old
    // buffer: drain the stream before it is freed rather than rely on
    // cudaFree's implicit synchronisation. Rare: buffers only grow.
    if (w.buffer.size() != 0) {
      if (auto ok = check(cudaStreamSynchronize(stream.get()), "work buffer growth"); !ok)
        return ok;
    }
    w.buffer = std::move(*grown);
    if (graphs_read)
      ++buffers_generation;
    return {};
  }
  /// Grows pinned host memory of a slot that is not in flight.
  [[nodiscard]] static result<void> reserve_pinned(kc::pinned_buffer& b, std::size_t bytes) {
    if (b.size() >= bytes)
      return {};
    auto grown = kc::pinned_buffer::make(std::max(bytes, b.size() * 3 / 2));
    if (!grown)
      return grown.error().with_context("model host staging");
    b = std::move(*grown);
    return {};
  }
  /// Draws each row's token from `logits` into `draws_to` with the rows'
  /// settings, uploaded as arrays from the slot's pinned `settings` first.
  [[nodiscard]] result<void> sample(std::span<const row_sampling> rows, forward_slot& slot);
  /// Every launch of one step from the uploaded plan, argmax (into
  /// `draws_to`) included when asked: what a decode graph captures.
  [[nodiscard]] result<void> launch_step(const nemotron_h_batch& b, const nemotron_h_state& st,
                                         const step_layout& layout, bool argmax);

  [[nodiscard]] result<void> check(cudaError_t err, std::string_view what) const {
    if (err == cudaSuccess)
      return {};
    return kc::cuda_error(err, what).with_context(name);
  }
  [[nodiscard]] result<device_matrix> weights(const std::vector<float>& w, std::int64_t rows,
                                              std::int64_t cols) const;
  [[nodiscard]] result<kc::device_buffer> floats(const std::vector<float>& w) const;
  /// `out_rows[t, N] = in[t, K] W^T`: f32 through cublasSgemm, or a bf16
  /// GEMM with f32 accumulation reading `in.bf16`, or `in.f32` rounded into
  /// the bf16 scratch first.
  /// `accumulate`: `out_rows += ...` instead (bf16 weights only).
  [[nodiscard]] result<void> linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                    float* out_rows, bool accumulate = false);
  /// Where the fused kernels put a GEMM's input: `f32` with float32
  /// weights, the bf16 scratch (`xb`) with bf16 weights.
  [[nodiscard]] gemm_input staged(const float* f32) const {
    if (dtype == mstar::dtype::float32)
      return {f32, nullptr};
    return {nullptr, xb.as<const std::uint16_t>()};
  }
  /// The bf16 scratch as `rows` x `cols` bf16, with bf16 weights; absent
  /// (f32 weights) otherwise.
  [[nodiscard]] kernels::view<std::uint16_t, 2> staged_bf16(std::int64_t rows,
                                                            std::int64_t cols) const {
    if (dtype == mstar::dtype::float32)
      return {};
    return kernels::matrix(xb.as<std::uint16_t>(), rows, cols);
  }
  /// `residual += delta` (null: no add), then the RMS norm with `weight`
  /// into the next GEMM's input: `f32_out` or the bf16 scratch (`staged`).
  [[nodiscard]] result<void> add_norm(float* residual, const float* delta, std::int64_t rows,
                                      const kc::device_buffer& weight, float* f32_out);
  [[nodiscard]] result<void> reserve(std::int64_t tokens, std::int64_t rows, std::size_t plan_ints);
  /// With a tensor-parallel group: `n` floats at `data` (device) become
  /// their sum over the ranks, after every launch queued before (the stream
  /// is drained: the collective is a host call). Without one, nothing.
  [[nodiscard]] result<void> all_reduce(float* data, std::size_t n);
  /// The LM head over `rows` normed rows at `normed` into `dest` [rows,
  /// vocab]: the whole head, or this rank's vocabulary part gathered with
  /// every other rank's.
  [[nodiscard]] result<void> lm_head_rows(const float* normed, std::int64_t rows, float* dest);
  [[nodiscard]] result<void> mamba(const device_layer& l, const layer_io& io, std::int64_t tokens,
                                   const nemotron_h_batch& b, const nemotron_h_state& s,
                                   const std::int32_t* cu, const std::int32_t* slots,
                                   const std::uint8_t* has);
  [[nodiscard]] result<void> attention(const device_layer& l, const layer_io& io,
                                       std::int64_t tokens, const kernels::kv_page_table& table,
                                       const kernels::kv_arena_view& kv);
};

struct nemotron_h_cuda::graph_cache {
  struct entry {
    std::unique_ptr<CUgraphExec_st, cuda_detail::graph_exec_deleter> exec;
    std::uint64_t buffers = 0;  // the work buffers' generation it was captured against
    // MSTAR_PLAN_KERNEL=2: the captured graph (kept: its nodes name the
    // instantiated ones) and its root, the plan kernel's node.
    std::unique_ptr<CUgraph_st, cuda_detail::graph_deleter> graph;
    cudaGraphNode_t plan_node = nullptr;
  };
  // Keyed by cuda_detail::graph_key.
  std::map<std::int64_t, entry> by_rows;
};

}  // namespace mstar::models
