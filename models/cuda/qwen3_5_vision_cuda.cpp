// qwen3_5_vision_cuda: opening the device, uploading the weights, sizing the
// work buffers, one encode. The launches (embedding, blocks, merger) live in
// qwen3_5_vision_cuda_layers.cpp, the private state in internal/.
#include "models/cuda/qwen3_5_vision_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/cuda/launch.hpp"
#include "models/cuda/internal/cuda_common.hpp"
#include "models/cuda/internal/qwen3_5_vision_cuda_impl.hpp"
#include "models/internal/vision_layout.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;

using qwen_vision_cuda::vision_block_weights;
using qwen_vision_cuda::vision_linear;
using qwen_vision_cuda::vision_norm;

qwen3_5_vision_cuda::qwen3_5_vision_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}

qwen3_5_vision_cuda::~qwen3_5_vision_cuda() {
  if (impl_)
    (void)impl_->stream.synchronize();
}

const qwen3_5_vision_config& qwen3_5_vision_cuda::config() const noexcept {
  return impl_->config;
}

result<std::unique_ptr<qwen3_5_vision_cuda>> qwen3_5_vision_cuda::make(
    int device, mstar::dtype dtype, const qwen3_5_vision& tower) {
  if (auto ok = cuda_detail::check_weights_dtype(dtype, "the CUDA vision tower"); !ok)
    return ok.error();
  const auto& c = tower.config();
  if (c.head_dim() > 256 || c.num_heads > 65535) {
    return make_error(errc::unsupported,
                      fmt::format("the CUDA vision tower's attention takes head_dim up to 256 "
                                  "and up to 65535 heads, not {} x {}",
                                  c.head_dim(), c.num_heads));
  }
  if (auto ok = cuda_detail::select_device(device, "vision tower"); !ok)
    return ok.error();
  auto p = std::make_unique<impl>();
  p->device = device;
  p->dtype = dtype;
  p->config = c;
  p->name = fmt::format("cuda:{} vision tower", device);
  auto s = kc::stream::make();
  if (!s)
    return s.error();
  p->stream = std::move(*s);
  auto blas = kc::blas_handle::make();
  if (!blas)
    return blas.error();
  p->blas = std::move(*blas);
  if (auto ok = p->upload(tower.weights()); !ok)
    return ok.error();
  return std::unique_ptr<qwen3_5_vision_cuda>(new qwen3_5_vision_cuda(std::move(p), dtype));
}

result<kc::device_buffer> qwen3_5_vision_cuda::impl::floats(const std::vector<float>& w) const {
  auto buf = kc::device_buffer::make(std::max<std::size_t>(w.size(), 1) * sizeof(float));
  if (!buf)
    return buf.error().with_context(name);
  if (!w.empty()) {
    if (auto ok = check(
            cudaMemcpy(buf->data(), w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice),
            "vision weight upload");
        !ok)
      return ok.error();
  }
  return std::move(*buf);
}

result<vision_linear> qwen3_5_vision_cuda::impl::linear_weights(const std::vector<float>& w,
                                                                const std::vector<float>& b,
                                                                std::int64_t rows,
                                                                std::int64_t cols) const {
  vision_linear l;
  l.rows = rows;
  l.cols = cols;
  if (static_cast<std::int64_t>(w.size()) != rows * cols ||
      static_cast<std::int64_t>(b.size()) != rows) {
    return make_error(errc::invalid_argument,
                      fmt::format("{}: a vision weight of {} floats (bias {}), [{}, {}] expected",
                                  name, w.size(), b.size(), rows, cols));
  }
  auto bias = floats(b);
  if (!bias)
    return bias.error();
  l.b = std::move(*bias);
  if (dtype == mstar::dtype::float32) {
    auto buf = floats(w);
    if (!buf)
      return buf.error();
    l.w = std::move(*buf);
    return l;
  }
  std::vector<std::uint16_t> bits(w.size());
  std::transform(w.begin(), w.end(), bits.begin(), mstar::float_to_bf16_bits);
  auto buf = kc::device_buffer::make(std::max<std::size_t>(bits.size(), 1) * sizeof(std::uint16_t));
  if (!buf)
    return buf.error().with_context(name);
  if (!bits.empty()) {
    if (auto ok = check(cudaMemcpy(buf->data(), bits.data(), bits.size() * sizeof(std::uint16_t),
                                   cudaMemcpyHostToDevice),
                        "vision weight upload");
        !ok)
      return ok.error();
  }
  l.w = std::move(*buf);
  return l;
}

result<vision_norm> qwen3_5_vision_cuda::impl::norm_weights(const std::vector<float>& w,
                                                            const std::vector<float>& b) const {
  vision_norm n;
  auto wd = floats(w);
  if (!wd)
    return wd.error();
  auto bd = floats(b);
  if (!bd)
    return bd.error();
  n.w = std::move(*wd);
  n.b = std::move(*bd);
  return n;
}

result<void> qwen3_5_vision_cuda::impl::upload(const qwen3_5_vision_weights& w) {
  const auto& c = config;
  const std::int64_t hid = c.hidden_size, inter_n = c.intermediate_size;
  const std::int64_t merged = c.merged_hidden();
#define MSTAR_VUP(dst, expr) \
  do {                       \
    auto up_ = (expr);       \
    if (!up_)                \
      return up_.error();    \
    (dst) = std::move(*up_); \
  } while (false)
  MSTAR_VUP(patch, linear_weights(w.patch_w, w.patch_b, hid, c.patch_dim()));
  MSTAR_VUP(pos_embed, floats(w.pos_embed));
  MSTAR_VUP(inv_freq, floats(internal::vision_rope_frequencies(c)));
  blocks.clear();
  for (const auto& b : w.blocks) {
    vision_block_weights d;
    MSTAR_VUP(d.norm1, norm_weights(b.norm1_w, b.norm1_b));
    MSTAR_VUP(d.norm2, norm_weights(b.norm2_w, b.norm2_b));
    MSTAR_VUP(d.qkv, linear_weights(b.qkv_w, b.qkv_b, 3 * hid, hid));
    MSTAR_VUP(d.proj, linear_weights(b.proj_w, b.proj_b, hid, hid));
    MSTAR_VUP(d.fc1, linear_weights(b.fc1_w, b.fc1_b, inter_n, hid));
    MSTAR_VUP(d.fc2, linear_weights(b.fc2_w, b.fc2_b, hid, inter_n));
    blocks.push_back(std::move(d));
  }
  MSTAR_VUP(merger_norm, norm_weights(w.merger_norm_w, w.merger_norm_b));
  MSTAR_VUP(merger_fc1, linear_weights(w.merger_fc1_w, w.merger_fc1_b, merged, merged));
  MSTAR_VUP(merger_fc2, linear_weights(w.merger_fc2_w, w.merger_fc2_b, c.out_hidden_size, merged));
#undef MSTAR_VUP
  return {};
}

// Every buffer sized for the most any step writes into it (see each use).
result<void> qwen3_5_vision_cuda::impl::reserve(std::int64_t patches, std::size_t frames) {
  const auto& c = config;
  const auto P = static_cast<std::size_t>(patches);
  const auto z = [](std::int64_t n) { return static_cast<std::size_t>(n); };
  const auto f = sizeof(float);
  const std::size_t tokens = P / z(c.merge_unit());
  // GEMM inputs: pixels [P, patch_dim], norms [P, hidden], attention [P,
  // hidden], fc1's output [P, intermediate], the merger's rows [P / m^2,
  // m^2 hidden] = [P, hidden] and their fc1 output of the same size.
  const std::size_t widest_in =
      std::max({z(c.patch_dim()), z(c.hidden_size), z(c.intermediate_size)});
  const std::pair<kc::device_buffer*, std::size_t> wants[] = {
      {&pixels, P * z(c.patch_dim()) * f},
      {&x, P * z(c.hidden_size) * f},
      {&y, P * z(c.hidden_size) * f},
      {&qkv, P * z(3 * c.hidden_size) * f},
      {&attn, P * z(c.hidden_size) * f},
      {&inter, P * std::max(z(c.intermediate_size), z(c.hidden_size)) * f},
      {&out, tokens * z(c.out_hidden_size) * f},
      {&xb, dtype == mstar::dtype::float32 ? 0 : P * widest_in * sizeof(std::uint16_t)},
      {&positions, 2 * P * sizeof(std::int32_t)},
      {&tap_index, 4 * P * sizeof(std::int32_t)},
      {&tap_weight, 4 * P * f},
      {&cu, (frames + 1) * sizeof(std::int32_t)},
  };
  for (const auto& want : wants) {
    if (want.first->size() >= want.second)
      continue;
    // The stream is idle (encode ends synchronised), so the old memory may go.
    *want.first = kc::device_buffer{};
    auto grown = kc::device_buffer::make(want.second);
    if (!grown)
      return grown.error().with_context(name + " work buffer");
    *want.first = std::move(*grown);
  }
  return {};
}

template <class T>
result<void> qwen3_5_vision_cuda::impl::put(kc::device_buffer& dst, const std::vector<T>& src,
                                            std::string_view what) {
  const std::size_t bytes = src.size() * sizeof(T);
  if (bytes > dst.size()) {
    return make_error(errc::internal, fmt::format("{}: {} needs {} bytes, its buffer holds {}",
                                                  name, what, bytes, dst.size()));
  }
  if (bytes == 0)
    return {};
  return check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyHostToDevice, stream.get()),
               what);
}

result<void> qwen3_5_vision_cuda::encode(std::span<const float> pixel_values,
                                         std::span<const vision_grid> grids,
                                         std::vector<float>& out) {
  out.clear();
  auto& p = *impl_;
  const auto patches = internal::check_vision_inputs(p.config, pixel_values.size(), grids);
  if (!patches)
    return patches.error();
  if (*patches == 0)
    return {};
  internal::layout_patches(p.config, grids, *patches, p.layout);
  const std::size_t frames = p.layout.cu_seqlens.size() - 1;
  if (auto ok = p.reserve(*patches, frames); !ok)
    return ok;
  auto run = [&]() -> result<void> {
    const auto& lay = p.layout;
    for (const auto& ok : {p.put(p.positions, lay.positions, "patch positions upload"),
                           p.put(p.tap_index, lay.tap_index, "position taps upload"),
                           p.put(p.tap_weight, lay.tap_weight, "position taps upload"),
                           p.put(p.cu, lay.cu_seqlens, "frame segments upload")}) {
      if (!ok)
        return ok;
    }
    if (auto ok = p.embed(pixel_values, *patches); !ok)
      return ok;
    for (const auto& b : p.blocks) {
      if (auto ok = p.block(b, *patches); !ok)
        return ok;
    }
    return p.merge(*patches);
  };
  auto ran = run();
  const std::int64_t tokens = *patches / p.config.merge_unit();
  std::vector<float> rows(static_cast<std::size_t>(tokens * p.config.out_hidden_size));
  if (ran) {
    ran = p.check(cudaMemcpyAsync(rows.data(), p.out.data(), rows.size() * sizeof(float),
                                  cudaMemcpyDeviceToHost, p.stream.get()),
                  "vision embeddings download");
  }
  // Drained whatever happened: the host staging above and the next encode's
  // buffer growth rely on an idle stream.
  const auto drained = p.check(cudaStreamSynchronize(p.stream.get()), "vision tower");
  if (!ran)
    return ran;
  if (!drained)
    return drained;
  out = std::move(rows);
  return {};
}

}  // namespace mstar::models

#else  // no CUDA in this build

namespace mstar::models {

struct qwen3_5_vision_cuda::impl {
  qwen3_5_vision_config config;
};

qwen3_5_vision_cuda::qwen3_5_vision_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}
qwen3_5_vision_cuda::~qwen3_5_vision_cuda() = default;

result<std::unique_ptr<qwen3_5_vision_cuda>> qwen3_5_vision_cuda::make(int, mstar::dtype,
                                                                       const qwen3_5_vision&) {
  return make_error(errc::unsupported,
                    "this build has no CUDA (configure with -DMSTAR_CUDA=ON where nvcc is found)");
}
const qwen3_5_vision_config& qwen3_5_vision_cuda::config() const noexcept {
  return impl_->config;
}
result<void> qwen3_5_vision_cuda::encode(std::span<const float>, std::span<const vision_grid>,
                                         std::vector<float>& out) {
  out.clear();
  return make_error(errc::unsupported, "this build has no CUDA");
}

}  // namespace mstar::models

#endif
