// qwen3_5_cuda: opening the device, uploading the weights, growing buffers.
// A step (launch / finish, decode graphs) lives in qwen3_5_cuda_step.cpp,
// the launches in qwen3_5_cuda_layers.cpp, the private state in internal/.
#include "models/cuda/qwen3_5_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <utility>

#include "kernels/cuda/device_arena.hpp"
#include "models/cuda/internal/qwen3_5_cuda_impl.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;

qwen3_5_cuda::qwen3_5_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}

qwen3_5_cuda::~qwen3_5_cuda() = default;

qwen3_5_cuda::impl::~impl() {
  (void)stream.synchronize();
  if (copies.get() != nullptr)
    (void)copies.synchronize();
  graph_by_rows.clear();  // graphs before the buffers they address
}

result<std::unique_ptr<qwen3_5_cuda>> qwen3_5_cuda::make(int device, mstar::dtype dtype,
                                                         bool graphs) {
  if (auto ok = cuda_detail::check_weights_dtype(dtype, "the CUDA model"); !ok)
    return ok.error();
  if (auto ok = cuda_detail::select_device(device, "--device cuda"); !ok)
    return ok.error();
  auto p = std::make_unique<impl>();
  p->device = device;
  p->dtype = dtype;
  p->graphs = graphs;
  p->fused_norms = cuda_detail::fused_norms_enabled();
  p->f32_folds = cuda_detail::f32_folds_enabled();
  // The batch-1 lookup fold on, the conv and argmax folds off unless
  // switched on: each made this model's step ~10 us slower on an H100
  // (bench/results/session43-calls/README.md).
  p->embed_fold = cuda_detail::embed_fold_enabled(true);
  p->conv_fold = cuda_detail::conv_fold_enabled(false);
  p->fused_qkv = cuda_detail::fused_qkv_enabled();
  p->direct_draws = cuda_detail::direct_draws_enabled();
  cudaDeviceProp prop{};
  if (auto ok = kc::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"); !ok)
    return ok.error();
  p->name = fmt::format("cuda:{} ({})", device, prop.name);
  auto s = kc::stream::make();
  if (!s)
    return s.error();
  p->stream = std::move(*s);
  // Side downloads: on unless MSTAR_SIDE_DOWNLOAD=0 (session 46 on an H100,
  // the 0.5B: ~6 us a step faster at batch 1 and 16; bench/README.md).
  auto copies = cuda_detail::side_stream(true);
  if (!copies)
    return copies.error();
  p->copies = std::move(*copies);
  auto blas = kc::blas_handle::make();
  if (!blas)
    return blas.error();
  p->blas = std::move(*blas);
  if (auto ok =
          cuda_detail::set_up_argmax_fold(false, p->argmax_fold, p->argmax_state, p->stream.get());
      !ok)
    return ok.error();
  return std::unique_ptr<qwen3_5_cuda>(new qwen3_5_cuda(std::move(p), dtype));
}

kernels::arena_factory qwen3_5_cuda::memory() const {
  return kc::device_arena_factory(impl_->stream.get(), impl_->device);
}

const std::string& qwen3_5_cuda::name() const noexcept {
  return impl_->name;
}

result<void> qwen3_5_cuda::load(const qwen3_5_config& config, const qwen3_5_host_weights& weights,
                                std::int64_t kv_pages) {
  impl_->kv_pages = kv_pages;
  impl_->graph_by_rows.clear();
  // The weights go to this model's device, whichever thread binds it.
  if (auto ok = kc::check(cudaSetDevice(impl_->device), "cudaSetDevice"); !ok)
    return ok;
  return impl_->upload(config, weights);
}

result<kc::device_buffer> qwen3_5_cuda::impl::floats(const std::vector<float>& w) const {
  auto buf = kc::device_buffer::make(w.size() * sizeof(float));
  if (!buf)
    return buf.error();
  if (!w.empty()) {
    if (auto ok = check(cudaMemcpy(buf->data(), w.data(), buf->size(), cudaMemcpyHostToDevice),
                        "weight upload");
        !ok)
      return ok.error();
  }
  return std::move(*buf);
}

result<qwen3_5_cuda::impl::device_matrix> qwen3_5_cuda::impl::weights(const std::vector<float>& w,
                                                                      std::int64_t rows,
                                                                      std::int64_t cols) const {
  device_matrix m;
  m.rows = rows;
  m.cols = cols;
  if (dtype == mstar::dtype::float32) {
    auto buf = floats(w);
    if (!buf)
      return buf.error();
    m.buffer = std::move(*buf);
    return m;
  }
  std::vector<std::uint16_t> bits(w.size());
  std::transform(w.begin(), w.end(), bits.begin(), mstar::float_to_bf16_bits);
  auto buf = kc::device_buffer::make(bits.size() * sizeof(std::uint16_t));
  if (!buf)
    return buf.error();
  if (auto ok = check(cudaMemcpy(buf->data(), bits.data(), buf->size(), cudaMemcpyHostToDevice),
                      "weight upload");
      !ok)
    return ok.error();
  m.buffer = std::move(*buf);
  return m;
}

result<void> qwen3_5_cuda::impl::upload(const qwen3_5_config& c, const qwen3_5_host_weights& w) {
  config = c;
  const std::int64_t hid = c.hidden_size, D = c.head_dim, ffn = c.intermediate_size;
  const std::int64_t qd = c.num_attention_heads * D, kvd = c.num_key_value_heads * D;
  const std::int64_t cd = c.delta_net().conv_dim(), vd = c.value_dim();
  const std::int64_t proj_n = cd + vd + 2 * c.linear_num_value_heads;
#define MSTAR_UP(dst, expr)  \
  do {                       \
    auto up_ = (expr);       \
    if (!up_)                \
      return up_.error();    \
    (dst) = std::move(*up_); \
  } while (false)
  MSTAR_UP(embeddings, floats(*w.embeddings));
  MSTAR_UP(norm, floats(*w.norm));
  MSTAR_UP(lm_head, weights(*w.lm_head, c.vocab_size, hid));
  // As the CPU forward: in float32, 1 / theta^(2i / rot).
  const auto rot = c.rotary_dim();
  std::vector<float> freq(static_cast<std::size_t>(rot / 2));
  for (std::int64_t i = 0; i < rot / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rot);
    freq[static_cast<std::size_t>(i)] = 1.0F / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  MSTAR_UP(inv_freq, floats(freq));
  layers.clear();
  for (const auto& l : w.layers) {
    qwen_cuda::layer d;
    d.mixer = l.mixer;
    d.sub_index = l.sub_index;
    MSTAR_UP(d.in_norm, floats(l.in_norm));
    MSTAR_UP(d.mlp_norm, floats(l.mlp_norm));
    std::vector<float> gate_up = l.gate;
    gate_up.insert(gate_up.end(), l.up.begin(), l.up.end());
    MSTAR_UP(d.gate_up, weights(gate_up, 2 * ffn, hid));
    MSTAR_UP(d.down, weights(l.down, hid, ffn));
    if (l.mixer == qwen3_5_mixer::delta_net) {
      MSTAR_UP(d.in_proj, weights(l.in_proj, proj_n, hid));
      MSTAR_UP(d.conv_w, floats(l.conv_w));
      MSTAR_UP(d.dt_bias, floats(l.dt_bias));
      MSTAR_UP(d.a_log, floats(l.a_log));
      MSTAR_UP(d.gnorm, floats(l.gnorm));
      MSTAR_UP(d.out_proj, weights(l.out_proj, hid, vd));
    } else {
      // q's rows hold each head's query and gate (2 qd).
      if (auto ok = cuda_detail::upload_qkv(
              l.q, l.k, l.v, 2 * qd, kvd, dtype,
              [&](const std::vector<float>& stacked, std::int64_t rows) {
                return weights(stacked, rows, hid);
              },
              d.qkv, d.q, d.k, d.v);
          !ok)
        return ok;
      MSTAR_UP(d.o, weights(l.o, hid, qd));
      MSTAR_UP(d.q_norm, floats(l.q_norm));
      MSTAR_UP(d.k_norm, floats(l.k_norm));
    }
    layers.push_back(std::move(d));
  }
#undef MSTAR_UP
  return {};
}

result<void> qwen3_5_cuda::impl::reserve_buffer(work_buffer& w, std::size_t bytes,
                                                bool graphs_read) {
  if (w.buffer.size() >= bytes)
    return {};
  auto grown = kc::device_buffer::make(std::max(bytes, w.buffer.size() * 3 / 2));
  if (!grown)
    return grown.error().with_context("model work buffer");
  // A forward still queued may read the old buffer: drain before it goes.
  if (w.buffer.size() != 0) {
    if (auto ok = check(cudaStreamSynchronize(stream.get()), "work buffer growth"); !ok)
      return ok;
  }
  w.buffer = std::move(*grown);
  if (graphs_read)
    ++buffers_generation;
  return {};
}

result<void> qwen3_5_cuda::impl::reserve_pinned(kc::pinned_buffer& b, std::size_t bytes) {
  if (b.size() >= bytes)
    return {};
  auto grown = kc::pinned_buffer::make(std::max(bytes, b.size() * 3 / 2));
  if (!grown)
    return grown.error().with_context("model host staging");
  b = std::move(*grown);
  return {};
}

result<void> qwen3_5_cuda::impl::reserve(std::int64_t tokens, std::int64_t rows,
                                         std::size_t plan_ints) {
  const auto& c = config;
  const auto T = static_cast<std::size_t>(tokens);
  const auto R = static_cast<std::size_t>(rows);
  const auto f = sizeof(float);
  const auto z = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  const std::int64_t cd = c.delta_net().conv_dim(), vd = c.value_dim();
  const std::int64_t proj_n = cd + vd + 2 * c.linear_num_value_heads;
  const auto widest = std::max({c.hidden_size, c.intermediate_size, qd, vd});
  const std::pair<work_buffer*, std::size_t> wants[] = {
      {&h, T * z(c.hidden_size) * f},
      {&x, T * z(c.hidden_size) * f},
      {&out, T * z(c.hidden_size) * f},
      {&proj, T * z(proj_n) * f},
      {&conv, T * z(cd) * f},
      {&rule, T * z(vd) * f},
      {&qg, std::max(T * z(2 * qd), z(2 * qd + 2 * kvd)) * f},  // one token: [q | k | v]
      {&q, T * z(qd) * f},
      {&k, T * z(kvd) * f},
      {&v, T * z(kvd) * f},
      {&o, T * z(qd) * f},
      {&inter, T * z(2 * c.intermediate_size) * f},
      {&act, T * z(c.intermediate_size) * f},
      {&xb, T * z(widest) * sizeof(std::uint16_t)},
      {&last, R * z(c.hidden_size) * f},
      {&logits, R * z(c.vocab_size) * f},
      {&plan, plan_ints * sizeof(std::int32_t)},
      {&greedy, R * sizeof(std::int32_t)},
  };
  for (const auto& want : wants) {
    if (auto ok = reserve_buffer(*want.first, want.second); !ok)
      return ok;
  }
  return {};
}

}  // namespace mstar::models

#else  // no CUDA in this build

namespace mstar::models {

struct qwen3_5_cuda::impl {};

qwen3_5_cuda::qwen3_5_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}
qwen3_5_cuda::~qwen3_5_cuda() = default;

result<std::unique_ptr<qwen3_5_cuda>> qwen3_5_cuda::make(int, mstar::dtype, bool) {
  return make_error(errc::unsupported,
                    "this build has no CUDA (configure with -DMSTAR_CUDA=ON where nvcc is found)");
}
kernels::arena_factory qwen3_5_cuda::memory() const {
  return {};
}
const std::string& qwen3_5_cuda::name() const noexcept {
  static const std::string none = "none";
  return none;
}
result<void> qwen3_5_cuda::load(const qwen3_5_config&, const qwen3_5_host_weights&, std::int64_t) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
result<std::uint64_t> qwen3_5_cuda::launch(const qwen3_5_step&, bool, std::span<const row_sampling>,
                                           std::span<const std::int32_t>) {
  return make_error(errc::unsupported, "this build has no CUDA");
}
result<void> qwen3_5_cuda::finish(std::uint64_t, std::vector<float>*, std::vector<std::int32_t>*) {
  return make_error(errc::unsupported, "this build has no CUDA");
}

}  // namespace mstar::models

#endif
