// nemotron_h_cuda: opening the device and uploading the weights. A step
// (launch / finish, the decode graphs, the timeline) lives in
// nemotron_h_cuda_step.cpp, the launches in nemotron_h_cuda_layers.cpp, the
// private state in internal/.
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <string_view>
#include <utility>

#include "kernels/cuda/device_arena.hpp"
#include "models/cuda/internal/nemotron_h_cuda_impl.hpp"

namespace mstar::models {
using kernels::matrix;

nemotron_h_cuda::nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype), graphs_cache_(std::make_unique<graph_cache>()) {}

nemotron_h_cuda::~nemotron_h_cuda() {
  if (impl_) {
    (void)impl_->stream.synchronize();
    if (impl_->copies.get() != nullptr)
      (void)impl_->copies.synchronize();
  }
  graphs_cache_.reset();  // graphs before the buffers they address
}

result<std::unique_ptr<nemotron_h_cuda>> nemotron_h_cuda::make(int device, mstar::dtype dtype,
                                                               bool graphs) {
  if (auto ok = cuda_detail::check_weights_dtype(dtype, "the CUDA model"); !ok)
    return ok.error();
  if (auto ok = cuda_detail::select_device(device, "--device cuda"); !ok)
    return ok.error();
  auto p = std::make_unique<impl>();
  p->device = device;
  p->dtype = dtype;
  p->fused_norms = cuda_detail::fused_norms_enabled();
  p->f32_folds = cuda_detail::f32_folds_enabled();
  // The batch-1 folds, all on unless switched off (each measured faster here:
  // bench/results/session43-calls/README.md).
  p->conv_fold = cuda_detail::conv_fold_enabled(true);
  p->embed_fold = cuda_detail::embed_fold_enabled(true);
  p->mlp_epilogue = cuda_detail::mlp_epilogue_enabled(true);
  p->append_fold = cuda_detail::append_fold_enabled(true);
  p->direct_draws = cuda_detail::direct_draws_enabled();
  p->fused_qkv = cuda_detail::fused_qkv_enabled();
  cudaDeviceProp prop{};
  if (auto ok = kc::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"); !ok)
    return ok.error();
  p->name = fmt::format("cuda:{} ({})", device, prop.name);
  auto s = kc::stream::make();
  if (!s)
    return s.error();
  p->stream = std::move(*s);
  auto copies = cuda_detail::side_stream(true);
  if (!copies)
    return copies.error();
  p->copies = std::move(*copies);
  if (const char* e = std::getenv("MSTAR_PLAN_KERNEL"); e != nullptr)
    p->plan_kernel = std::string_view{e} == "0" ? 0 : std::string_view{e} == "1" ? 1 : 2;
  p->plan_inline = cuda_detail::switch_on("MSTAR_PLAN_INLINE", false);
  p->ssd_early = cuda_detail::switch_on("MSTAR_SSD_EARLY", false);
  auto blas = kc::blas_handle::make();
  if (!blas)
    return blas.error();
  p->blas = std::move(*blas);
  if (auto ok =
          cuda_detail::set_up_argmax_fold(true, p->argmax_fold, p->argmax_state, p->stream.get());
      !ok)
    return ok.error();
  p->ssd_norm_fold = cuda_detail::ssd_norm_fold_enabled(true);
  auto model = std::unique_ptr<nemotron_h_cuda>(new nemotron_h_cuda(std::move(p), dtype));
  model->graphs_ = graphs;
  return model;
}

kernels::arena_factory nemotron_h_cuda::memory() const {
  return kc::device_arena_factory(impl_->stream.get(), impl_->device);
}

const std::string& nemotron_h_cuda::name() const noexcept {
  return impl_->name;
}

result<void> nemotron_h_cuda::upload(const nemotron_h_config& config,
                                     const nemotron_h_host_weights& w) {
  auto& p = *impl_;
  p.config = config;
  const auto& c = config;
  const std::int64_t hid = c.hidden_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
#define MSTAR_UP(dst, expr)  \
  do {                       \
    auto up_ = (expr);       \
    if (!up_)                \
      return up_.error();    \
    (dst) = std::move(*up_); \
  } while (false)
  MSTAR_UP(p.embeddings, p.floats(*w.embeddings));
  MSTAR_UP(p.norm_f, p.floats(*w.norm_f));
  // A tensor-parallel rank holds its part of the vocabulary (maybe none).
  const std::int64_t head_rows = p.tp.comm != nullptr ? p.tp.vocab_rows : c.vocab_size;
  if (head_rows > 0)
    MSTAR_UP(p.lm_head, p.weights(*w.lm_head, head_rows, hid));
  p.layers.clear();
  for (const auto& l : w.layers) {
    device_layer d;
    d.kind = l.kind;
    d.sub_index = l.sub_index;
    MSTAR_UP(d.norm, p.floats(l.norm));
    switch (l.kind) {
      case layer_kind::mamba2:
        MSTAR_UP(d.in_proj, p.weights(l.in_proj, c.in_proj_size(), hid));
        MSTAR_UP(d.conv_w, p.floats(l.conv_w));
        MSTAR_UP(d.conv_b, p.floats(l.conv_b));
        MSTAR_UP(d.dt_bias, p.floats(l.dt_bias));
        MSTAR_UP(d.a_log, p.floats(l.a_log));
        MSTAR_UP(d.d, p.floats(l.d));
        MSTAR_UP(d.gnorm, p.floats(l.gnorm));
        MSTAR_UP(d.out_proj, p.weights(l.out_proj, hid, c.d_inner()));
        break;
      case layer_kind::attention:
        if (auto ok = cuda_detail::upload_qkv(
                l.q, l.k, l.v, qd, kvd, p.dtype,
                [&](const std::vector<float>& stacked, std::int64_t rows) {
                  return p.weights(stacked, rows, hid);
                },
                d.qkv, d.q, d.k, d.v);
            !ok)
          return ok;
        MSTAR_UP(d.o, p.weights(l.o, hid, qd));
        break;
      case layer_kind::mlp:
        MSTAR_UP(d.up, p.weights(l.up, c.intermediate_size, hid));
        MSTAR_UP(d.down, p.weights(l.down, hid, c.intermediate_size));
        break;
      case layer_kind::moe:
        return make_error(errc::unsupported, "MoE layers (E) are not supported yet");
    }
    p.layers.push_back(std::move(d));
  }
#undef MSTAR_UP
  return {};
}

result<void> nemotron_h_cuda::load(const nemotron_h_config& config,
                                   const nemotron_h_host_weights& weights, std::int64_t kv_pages) {
  set_graphs(graphs_, kv_pages);
  // The weights go to this model's device, whichever thread binds it.
  if (auto ok = kc::check(cudaSetDevice(impl_->device), "cudaSetDevice"); !ok)
    return ok;
  return upload(config, weights);
}

void nemotron_h_cuda::set_graphs(bool on, std::int64_t kv_pages) {
  graphs_ = on;
  kv_pages_ = kv_pages;
  graphs_cache_->by_rows.clear();
}

}  // namespace mstar::models

#else  // no CUDA in this build

namespace mstar::models {

struct nemotron_h_cuda::impl {};
struct nemotron_h_cuda::graph_cache {};

nemotron_h_cuda::nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}
void nemotron_h_cuda::set_graphs(bool, std::int64_t) {}
void nemotron_h_cuda::record_timeline(bool) {}
std::vector<device_step_time> nemotron_h_cuda::take_timeline() {
  return {};
}
result<void> nemotron_h_cuda::load(const nemotron_h_config&, const nemotron_h_host_weights&,
                                   std::int64_t) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
nemotron_h_cuda::~nemotron_h_cuda() = default;

result<std::unique_ptr<nemotron_h_cuda>> nemotron_h_cuda::make(int, mstar::dtype, bool) {
  return make_error(errc::unsupported,
                    "this build has no CUDA (configure with -DMSTAR_CUDA=ON where nvcc is found)");
}
kernels::arena_factory nemotron_h_cuda::memory() const {
  return {};
}
const std::string& nemotron_h_cuda::name() const noexcept {
  static const std::string none = "none";
  return none;
}
result<void> nemotron_h_cuda::upload(const nemotron_h_config&, const nemotron_h_host_weights&) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
result<void> nemotron_h_cuda::forward(const nemotron_h_batch&, const nemotron_h_state&,
                                      std::vector<float>*, std::vector<std::int32_t>*,
                                      std::span<const row_sampling>) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
result<std::uint64_t> nemotron_h_cuda::launch(const nemotron_h_batch&, const nemotron_h_state&,
                                              bool, std::span<const row_sampling>,
                                              std::span<const std::int32_t>) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
result<void> nemotron_h_cuda::finish(std::uint64_t, std::vector<float>*,
                                     std::vector<std::int32_t>*) {
  return make_error(errc::unsupported, "this build has no CUDA");
}

}  // namespace mstar::models

#endif
