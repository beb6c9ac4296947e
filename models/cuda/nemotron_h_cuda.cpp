// nemotron_h_cuda: device weights, work buffers and the forward on one
// stream. Mirrors models/nemotron_h_forward.cpp step for step.
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>

#include "kernels/cuda/device_arena.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/math.hpp"
#include "models/internal/mamba_params.hpp"
#include "models/nemotron_h.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;
using kernels::matrix;
using kernels::vector;

namespace {

// A device matrix [rows, cols] in the weights' dtype.
struct device_matrix {
  kc::device_buffer buffer;
  std::int64_t rows = 0, cols = 0;
};

struct device_layer {
  layer_kind kind = layer_kind::mlp;
  std::int32_t sub_index = 0;
  kc::device_buffer norm, conv_w, conv_b, dt_bias, a_log, d, gnorm;  // f32
  device_matrix in_proj, out_proj, q, k, v, o, up, down;
};

// A GEMM's input rows: float32, or already bfloat16 (written there by the
// fused kernel before the GEMM). bf16 rows are read only with bf16 weights.
struct gemm_input {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
};

// A grow-only device buffer: resized only between steps (after the stream
// drained), so no queued kernel reads memory being freed.
struct work_buffer {
  kc::device_buffer buffer;
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return buffer.as<T>();
  }
};

}  // namespace

struct step_layout;

struct nemotron_h_cuda::impl {
  int device = 0;
  std::string name;
  mstar::dtype dtype = mstar::dtype::bfloat16;
  kc::stream stream;
  kc::blas_handle blas;
  nemotron_h_config config;
  kc::device_buffer embeddings, norm_f;  // f32
  device_matrix lm_head;
  std::vector<device_layer> layers;
  // Work buffers, sized per step.
  work_buffer h, x, out, zxbcdt, xbc, y, q, k, v, o, inter, xb, last, logits, plan, greedy;
  work_buffer split;     // split-KV decode attention partials
  work_buffer settings;  // per-row sampling settings, struct of arrays
  std::vector<std::byte> host_settings;
  std::vector<std::int32_t> host_plan;
  std::uint64_t buffers_generation = 0;  // bumped whenever a work buffer moves

  /// `graphs_read`: captured graphs address this buffer, so moving it
  /// retires them.
  [[nodiscard]] result<void> reserve_buffer(work_buffer& w, std::size_t bytes,
                                            bool graphs_read = true) {
    if (w.buffer.size() >= bytes)
      return {};
    auto grown = kc::device_buffer::make(std::max(bytes, w.buffer.size() * 3 / 2));
    if (!grown)
      return grown.error().with_context("model work buffer");
    w.buffer = std::move(*grown);
    if (graphs_read)
      ++buffers_generation;
    return {};
  }
  /// Draws each row's token from `logits` into `greedy` with the rows'
  /// settings (uploaded as arrays first).
  [[nodiscard]] result<void> sample(std::span<const row_sampling> rows);
  /// Every launch of one step from the uploaded plan, argmax included when
  /// asked: what a decode graph captures.
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
  [[nodiscard]] result<void> linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                    float* out_rows);
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
    return matrix(xb.as<std::uint16_t>(), rows, cols);
  }
  /// `residual += delta` (null: no add), then the RMS norm with `weight`
  /// into the next GEMM's input: `f32_out` or the bf16 scratch (`staged`).
  [[nodiscard]] result<void> add_norm(float* residual, const float* delta, std::int64_t rows,
                                      const kc::device_buffer& weight, float* f32_out);
  [[nodiscard]] result<void> reserve(std::int64_t tokens, std::int64_t rows, std::size_t plan_ints);
  [[nodiscard]] result<void> mamba(const device_layer& l, std::int64_t tokens,
                                   const nemotron_h_batch& b, const nemotron_h_state& s,
                                   const std::int32_t* cu, const std::int32_t* slots,
                                   const std::uint8_t* has);
  [[nodiscard]] result<void> attention(const device_layer& l, std::int64_t tokens,
                                       const kernels::kv_page_table& table,
                                       const kernels::kv_arena_view& kv);
};

result<kc::device_buffer> nemotron_h_cuda::impl::floats(const std::vector<float>& w) const {
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

result<device_matrix> nemotron_h_cuda::impl::weights(const std::vector<float>& w, std::int64_t rows,
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
  std::transform(w.begin(), w.end(), bits.begin(), kernels::to_bf16_bits);
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

result<void> nemotron_h_cuda::impl::linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                           float* out_rows) {
  const cudaStream_t s = stream.get();
  if (dtype == mstar::dtype::float32) {
    return check(kc::linear(blas,
                            {matrix(in.f32, t, w.cols),
                             matrix(w.buffer.as<const float>(), w.rows, w.cols),
                             {},
                             matrix(out_rows, t, w.rows)},
                            s),
                 "linear");
  }
  const std::uint16_t* x16 = in.bf16;
  if (x16 == nullptr) {
    auto* xb16 = xb.as<std::uint16_t>();
    if (auto ok = check(kc::to_bf16(in.f32, xb16, t * w.cols, s), "to_bf16"); !ok)
      return ok;
    x16 = xb16;
  }
  kc::linear_bf16_params p;
  p.x = matrix(x16, t, w.cols);
  p.weight = matrix(w.buffer.as<const std::uint16_t>(), w.rows, w.cols);
  p.out_f32 = matrix(out_rows, t, w.rows);
  return check(kc::linear_bf16(blas, p, s), "linear_bf16");
}

result<void> nemotron_h_cuda::impl::add_norm(float* residual, const float* delta, std::int64_t rows,
                                             const kc::device_buffer& weight, float* f32_out) {
  const std::int64_t hid = config.hidden_size;
  kernels::add_rms_norm_params p;
  p.residual = matrix(residual, rows, hid);
  if (delta != nullptr)
    p.delta = matrix(delta, rows, hid);
  p.weight = vector(weight.as<const float>(), hid);
  p.out_bf16 = staged_bf16(rows, hid);
  if (!p.out_bf16)
    p.out = matrix(f32_out, rows, hid);
  p.eps = static_cast<float>(config.layer_norm_epsilon);
  return check(kc::add_rms_norm(p, stream.get()), "add_rms_norm");
}

result<void> nemotron_h_cuda::impl::reserve(std::int64_t tokens, std::int64_t rows,
                                            std::size_t plan_ints) {
  const auto& c = config;
  const auto T = static_cast<std::size_t>(tokens);
  const auto f = sizeof(float);
  const auto hid = static_cast<std::size_t>(c.hidden_size);
  const auto qd = static_cast<std::size_t>(c.num_attention_heads * c.head_dim);
  const auto kvd = static_cast<std::size_t>(c.num_key_value_heads * c.head_dim);
  const auto widest = std::max({hid, static_cast<std::size_t>(c.in_proj_size()),
                                static_cast<std::size_t>(c.intermediate_size), qd,
                                static_cast<std::size_t>(c.d_inner())});
  const auto R = static_cast<std::size_t>(rows);
  const std::pair<work_buffer*, std::size_t> wants[] = {
      {&h, T * hid * f},
      {&x, T * hid * f},
      {&out, T * hid * f},
      {&zxbcdt, T * static_cast<std::size_t>(c.in_proj_size()) * f},
      {&xbc, T * static_cast<std::size_t>(c.conv_dim()) * f},
      {&y, T * static_cast<std::size_t>(c.d_inner()) * f},
      {&q, T * qd * f},
      {&k, T * kvd * f},
      {&v, T * kvd * f},
      {&o, T * qd * f},
      {&inter, T * static_cast<std::size_t>(c.intermediate_size) * f},
      {&xb, T * widest * sizeof(std::uint16_t)},
      {&last, R * hid * f},
      {&logits, R * static_cast<std::size_t>(c.vocab_size) * f},
      {&plan, plan_ints * sizeof(std::int32_t)},
      {&greedy, R * sizeof(std::int32_t)},
  };
  for (const auto& [buffer, bytes] : wants) {
    if (auto ok = reserve_buffer(*buffer, bytes); !ok)
      return ok;
  }
  return {};
}

result<void> nemotron_h_cuda::impl::mamba(const device_layer& l, std::int64_t tokens,
                                          const nemotron_h_batch& b, const nemotron_h_state& st,
                                          const std::int32_t* cu, const std::int32_t* slots_d,
                                          const std::uint8_t* has_d) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const std::int64_t di = c.d_inner();
  const std::int64_t proj = c.in_proj_size();
  float* zx = zxbcdt.as<float>();
  float* xc = xbc.as<float>();
  float* yy = y.as<float>();
  if (auto ok = linear(staged(x.as<float>()), tokens, l.in_proj, zx); !ok)
    return ok;
  const auto rows = static_cast<std::int32_t>(b.cu.size() - 1);
  const std::span<const std::int32_t> slots{slots_d, static_cast<std::size_t>(rows)};
  const std::span<const std::uint8_t> has{has_d, static_cast<std::size_t>(rows)};
  const std::span<const std::int32_t> cu_d{cu, b.cu.size()};
  const auto cw = internal::conv_weights_of(
      c, l.conv_w.as<const float>(), l.conv_b.size() == 0 ? nullptr : l.conv_b.as<const float>());
  float* conv_state = st.conv_state[static_cast<std::size_t>(l.sub_index)];
  float* ssm_state = st.ssm_state[static_cast<std::size_t>(l.sub_index)];
  const cudaError_t conv =
      b.decode ? kc::causal_conv_update({cw, zx + di, proj, xc, rows, conv_state, slots, has}, s)
               : kc::causal_conv_varlen({cw, zx + di, proj, xc, cu_d, conv_state, slots, has}, s);
  if (auto ok = check(conv, "causal conv"); !ok)
    return ok;
  const auto sw = internal::ssd_weights_of(c, l.dt_bias.as<const float>(),
                                           l.a_log.as<const float>(), l.d.as<const float>());
  const auto in = internal::ssd_inputs_of(c, xc, zx);
  const cudaError_t ssd = b.decode
                              ? kc::ssd_update({sw, in, yy, rows, ssm_state, slots, has}, s)
                              : kc::ssd_scan_varlen({sw, in, yy, cu_d, ssm_state, slots, has}, s);
  if (auto ok = check(ssd, "ssd"); !ok)
    return ok;
  // In place in f32; with bf16 weights straight into out_proj's input.
  const kernels::view<const float, 2> z{zx, {tokens, di}, {proj, 1}};
  auto yv = matrix(yy, tokens, di);
  kernels::gated_rms_norm_params g{yv,
                                   z,
                                   vector(l.gnorm.as<const float>(), di),
                                   {},
                                   c.gated_norm_group_size(),
                                   static_cast<float>(c.layer_norm_epsilon)};
  g.out_bf16 = staged_bf16(tokens, di);
  if (!g.out_bf16)
    g.out = yv;
  if (auto ok = check(kc::gated_rms_norm(g, s), "gated_rms_norm"); !ok)
    return ok;
  return linear(staged(yy), tokens, l.out_proj, out.as<float>());
}

result<void> nemotron_h_cuda::impl::attention(const device_layer& l, std::int64_t tokens,
                                              const kernels::kv_page_table& table,
                                              const kernels::kv_arena_view& kv) {
  const cudaStream_t s = stream.get();
  const gemm_input xs = staged(x.as<float>());
  if (auto ok = linear(xs, tokens, l.q, q.as<float>()); !ok)
    return ok;
  if (auto ok = linear(xs, tokens, l.k, k.as<float>()); !ok)
    return ok;
  if (auto ok = linear(xs, tokens, l.v, v.as<float>()); !ok)
    return ok;
  if (auto ok = check(kc::append_kv({kv, l.sub_index, table, k.as<float>(), v.as<float>()}, s),
                      "append_kv");
      !ok)
    return ok;
  // Small decode batches over long contexts split each row's positions
  // over several blocks (the workspace is sized per step, before any launch).
  const kernels::paged_attention_params ap{kv,
                                           l.sub_index,
                                           table,
                                           q.as<float>(),
                                           o.as<float>(),
                                           static_cast<std::int32_t>(config.num_attention_heads),
                                           0.0F};
  if (auto ok = check(kc::paged_attention(ap, split.buffer.data(), split.buffer.size(), s),
                      "paged_attention");
      !ok)
    return ok;
  // The attention output is f32: with bf16 weights linear rounds it first.
  return linear({o.as<float>()}, tokens, l.o, out.as<float>());
}

nemotron_h_cuda::nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype), graphs_cache_(std::make_unique<graph_cache>()) {}

nemotron_h_cuda::~nemotron_h_cuda() {
  if (impl_)
    (void)impl_->stream.synchronize();
  graphs_cache_.reset();  // graphs before the buffers they address
}

result<std::unique_ptr<nemotron_h_cuda>> nemotron_h_cuda::make(int device, mstar::dtype dtype) {
  if (dtype != mstar::dtype::bfloat16 && dtype != mstar::dtype::float32) {
    return make_error(
        errc::invalid_argument,
        fmt::format("the CUDA model runs bfloat16 or float32 weights, not {}", to_string(dtype)));
  }
  int count = 0;
  if (auto ok = kc::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !ok)
    return ok.error().with_context("--device cuda");
  if (device < 0 || device >= count) {
    return make_error(errc::invalid_argument,
                      fmt::format("cuda:{} does not exist ({} device(s) visible)", device, count));
  }
  if (auto ok = kc::check(cudaSetDevice(device), "cudaSetDevice"); !ok)
    return ok.error();
  auto p = std::make_unique<impl>();
  p->device = device;
  p->dtype = dtype;
  cudaDeviceProp prop{};
  if (auto ok = kc::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"); !ok)
    return ok.error();
  p->name = fmt::format("cuda:{} ({})", device, prop.name);
  auto s = kc::stream::make();
  if (!s)
    return s.error();
  p->stream = std::move(*s);
  auto blas = kc::blas_handle::make();
  if (!blas)
    return blas.error();
  p->blas = std::move(*blas);
  return std::unique_ptr<nemotron_h_cuda>(new nemotron_h_cuda(std::move(p), dtype));
}

kernels::arena_factory nemotron_h_cuda::memory() const {
  return kc::device_arena_factory(impl_->stream.get());
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
  MSTAR_UP(p.lm_head, p.weights(*w.lm_head, c.vocab_size, hid));
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
        MSTAR_UP(d.q, p.weights(l.q, qd, hid));
        MSTAR_UP(d.k, p.weights(l.k, kvd, hid));
        MSTAR_UP(d.v, p.weights(l.v, kvd, hid));
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

// Where each index array of a step sits in the plan buffer (int32 units).
// Every offset depends only on (tokens, rows, the KV index capacity), so a
// decode graph captured for R rows reads the same addresses every step.
struct step_layout {
  std::size_t ids = 0, cu = 0, last = 0, qo = 0, kvp = 0, lpl = 0, dp = 0, dop = 0, slots = 0,
              has = 0, kvi = 0, total = 0;
  std::size_t n_dp = 0, n_kvi = 0;
};

namespace {

step_layout layout_for(std::size_t tokens, std::size_t rows, std::size_t n_dp,
                       std::size_t kvi_capacity) {
  step_layout l;
  std::size_t at = 0;
  const auto take = [&at](std::size_t n) {
    const auto here = at;
    at += n;
    return here;
  };
  l.ids = take(tokens);
  l.cu = take(rows + 1);
  l.last = take(rows);
  l.qo = take(rows + 1);
  l.kvp = take(rows + 1);
  l.lpl = take(rows);
  l.dp = take(n_dp);
  l.dop = take(n_dp);
  l.slots = take(rows);
  l.has = take((rows + 3) / 4);
  l.kvi = take(kvi_capacity);
  l.total = at;
  l.n_dp = n_dp;
  l.n_kvi = kvi_capacity;
  return l;
}

// An instantiated graph, destroyed with its owner.
struct graph_exec_deleter {
  void operator()(CUgraphExec_st* g) const noexcept { (void)cudaGraphExecDestroy(g); }
};

}  // namespace

struct nemotron_h_cuda::graph_cache {
  struct entry {
    std::unique_ptr<CUgraphExec_st, graph_exec_deleter> exec;
    std::uint64_t buffers = 0;  // the work buffers' generation it was captured against
  };
  std::map<std::int64_t, entry> by_rows;
};

result<void> nemotron_h_cuda::impl::launch_step(const nemotron_h_batch& b,
                                                const nemotron_h_state& st, const step_layout& L,
                                                bool argmax) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const auto T = static_cast<std::int64_t>(b.ids.size());
  const auto R = static_cast<std::int64_t>(b.cu.size()) - 1;
  const std::int64_t hid = c.hidden_size;
  const auto* dplan = plan.as<std::int32_t>();
  const auto dspan = [&](std::size_t at, std::size_t n) {
    return std::span<const std::int32_t>{dplan + at, n};
  };
  const auto rows = static_cast<std::size_t>(R);
  kernels::kv_page_table table;
  if (st.kv_plan != nullptr) {
    table = {dspan(L.qo, rows + 1), dspan(L.kvp, rows + 1), dspan(L.kvi, L.n_kvi),
             dspan(L.lpl, rows),    dspan(L.dp, L.n_dp),    dspan(L.dop, L.n_dp)};
  }
  const auto* has_d = reinterpret_cast<const std::uint8_t*>(dplan + L.has);
  float* hh = h.as<float>();
  float* xx = x.as<float>();
  float* oo = out.as<float>();
  if (auto ok = check(kc::embedding({vector(dplan + L.ids, T),
                                     matrix(embeddings.as<const float>(), c.vocab_size, hid),
                                     matrix(hh, T, hid)},
                                    s),
                      "embedding");
      !ok)
    return ok;
  // The residual stream: each layer's output (`out`) is added to h by the
  // next layer's norm (`pending`), which writes that layer's GEMM input.
  const float* pending = nullptr;
  for (const auto& l : layers) {
    if (auto ok = add_norm(hh, pending, T, l.norm, xx); !ok)
      return ok;
    result<void> mixed;
    switch (l.kind) {
      case layer_kind::mamba2:
        mixed = mamba(l, T, b, st, dplan + L.cu, dplan + L.slots, has_d);
        break;
      case layer_kind::attention:
        mixed = attention(l, T, table, st.kv);
        break;
      case layer_kind::mlp: {
        float* in = inter.as<float>();
        mixed = linear(staged(xx), T, l.up, in);
        if (!mixed)
          break;
        // In place in f32; with bf16 weights straight into down's input.
        auto iv = matrix(in, T, c.intermediate_size);
        kernels::activation_params a{
            iv,
            {},
            staged_bf16(T, c.intermediate_size),
            c.mlp_hidden_act == "silu" ? kernels::activation::silu : kernels::activation::relu2};
        if (!a.out_bf16)
          a.out = iv;
        mixed = check(kc::activate(a, s), "mlp activation");
        if (!mixed)
          break;
        mixed = linear(staged(in), T, l.down, oo);
        break;
      }
      case layer_kind::moe:
        break;  // refused at load
    }
    if (!mixed)
      return mixed;
    pending = oo;
  }
  // Only each row's last token needs the head. A decode step's rows are one
  // token each (row r's last token is token r): the last add and the final
  // norm run over h as it is. Otherwise add, gather those rows (an
  // embedding lookup into h), then norm them.
  float* ll = last.as<float>();
  float* lg = logits.as<float>();
  if (b.decode && T == R) {
    if (auto ok = add_norm(hh, pending, T, norm_f, ll); !ok)
      return ok;
  } else {
    if (pending != nullptr) {
      auto hv = matrix(hh, T, hid);
      if (auto ok = check(kc::add({hv, matrix(pending, T, hid), hv}, s), "residual add"); !ok)
        return ok;
    }
    if (auto ok = check(kc::embedding({vector(dplan + L.last, R), matrix<const float>(hh, T, hid),
                                       matrix(ll, R, hid)},
                                      s),
                        "last-token gather");
        !ok)
      return ok;
    if (auto ok = add_norm(ll, nullptr, R, norm_f, ll); !ok)
      return ok;
  }
  if (auto ok = linear(staged(ll), R, lm_head, lg); !ok)
    return ok;
  if (!argmax)
    return {};
  return check(kc::argmax(matrix<const float>(lg, R, c.vocab_size), greedy.as<std::int32_t>(), s),
               "argmax");
}

result<void> nemotron_h_cuda::impl::sample(std::span<const row_sampling> rows) {
  const std::size_t R = rows.size();
  // [temperature f32][top_p f32][top_k i32] then [seed u64][counter u64],
  // each R long; the u64 arrays start 8-byte aligned.
  const std::size_t words = (3 * R + 1) / 2 * 2;
  const std::size_t bytes = words * 4 + 2 * R * 8;
  host_settings.assign(bytes, std::byte{0});
  auto* f = reinterpret_cast<float*>(host_settings.data());
  auto* top_k = reinterpret_cast<std::int32_t*>(f + 2 * R);
  auto* u = reinterpret_cast<std::uint64_t*>(host_settings.data() + words * 4);
  for (std::size_t r = 0; r < R; ++r) {
    f[r] = rows[r].temperature;
    f[R + r] = rows[r].top_p;
    top_k[r] = rows[r].top_k;
    u[r] = rows[r].seed;
    u[R + r] = rows[r].counter;
  }
  if (auto ok = reserve_buffer(settings, bytes, false); !ok)
    return ok;
  const cudaStream_t s = stream.get();
  if (auto ok = check(cudaMemcpyAsync(settings.buffer.data(), host_settings.data(), bytes,
                                      cudaMemcpyHostToDevice, s),
                      "sampling settings upload");
      !ok)
    return ok;
  const auto* df = settings.as<const float>();
  const auto* du =
      reinterpret_cast<const std::uint64_t*>(settings.as<const std::byte>() + words * 4);
  kc::sample_batch_params p;
  p.logits =
      matrix<const float>(logits.as<float>(), static_cast<std::int64_t>(R), config.vocab_size);
  p.temperature = df;
  p.top_p = df + R;
  p.top_k = reinterpret_cast<const std::int32_t*>(df + 2 * R);
  p.seed = du;
  p.counter = du + R;
  p.out = greedy.as<std::int32_t>();
  return check(kc::sample(p, s), "sample");
}

result<void> nemotron_h_cuda::forward(const nemotron_h_batch& b, const nemotron_h_state& st,
                                      std::vector<float>* logits,
                                      std::vector<std::int32_t>* sampled,
                                      std::span<const row_sampling> sampling) {
  auto& p = *impl_;
  const auto& c = p.config;
  const cudaStream_t s = p.stream.get();
  const auto T = b.ids.size();
  const auto R = b.cu.size() - 1;
  const auto* kp = st.kv_plan;
  // A decode step replays the graph captured for its row count: the KV index
  // region then has room for every page of the pool, so the addresses and
  // launch shapes do not change as contexts grow.
  const bool graph = graphs_ && b.decode && (kp == nullptr || kp->decode);
  const std::size_t n_dp = kp != nullptr ? kp->decode_page.size() : 0;
  const std::size_t kvi_capacity = kp == nullptr ? 0
                                   : graph       ? static_cast<std::size_t>(kv_pages_)
                                                 : kp->kv_indices.size();
  const step_layout L = layout_for(T, R, n_dp, kvi_capacity);
  auto& hp = p.host_plan;
  hp.assign(L.total, 0);
  const auto put = [&hp](std::size_t at, std::span<const std::int32_t> a) {
    std::copy(a.begin(), a.end(), hp.begin() + static_cast<long>(at));
  };
  put(L.ids, b.ids);
  put(L.cu, b.cu);
  for (std::size_t r = 0; r < R; ++r)
    hp[L.last + r] = b.cu[r + 1] - 1;
  if (kp != nullptr) {
    if (kp->kv_indices.size() > kvi_capacity) {
      return make_error(errc::out_of_range,
                        fmt::format("step addresses {} pages, the pool holds {}",
                                    kp->kv_indices.size(), kvi_capacity));
    }
    put(L.qo, kp->qo_indptr);
    put(L.kvp, kp->kv_indptr);
    put(L.lpl, kp->last_page_len);
    put(L.dp, kp->decode_page);
    put(L.dop, kp->decode_offset);
    put(L.kvi, kp->kv_indices);
  }
  if (st.rec != nullptr) {
    put(L.slots, std::span{st.rec->slot_indices}.first(R));
    std::memcpy(hp.data() + L.has, st.rec->has_state.data(), R);
  }
  const std::uint64_t before = p.buffers_generation;
  if (auto ok = p.reserve(static_cast<std::int64_t>(T), static_cast<std::int64_t>(R), L.total); !ok)
    return ok;
  kernels::kv_page_table sizes;  // host sizes only: what the split workspace depends on
  std::vector<std::int32_t> qo_sizes(R + 1), kvi_sizes(L.n_kvi);
  if (kp != nullptr) {
    sizes = {qo_sizes, qo_sizes, kvi_sizes, {qo_sizes.data(), R}, {}, {}};
    if (L.n_dp > 0)
      sizes.decode_page = sizes.decode_offset = {qo_sizes.data(), R};
    const kernels::paged_attention_params probe{
        st.kv, 0, sizes, nullptr, nullptr, static_cast<std::int32_t>(c.num_attention_heads), 0.0F};
    if (auto ok = p.reserve_buffer(p.split, kc::paged_attention_workspace_bytes(probe)); !ok)
      return ok;
  }
  if (auto ok = p.check(cudaMemcpyAsync(p.plan.as<std::int32_t>(), hp.data(),
                                        L.total * sizeof(std::int32_t), cudaMemcpyHostToDevice, s),
                        "step upload");
      !ok)
    return ok;
  const bool all_greedy = std::all_of(sampling.begin(), sampling.end(),
                                      [](const row_sampling& r) { return r.temperature == 0.0F; });
  if (sampled != nullptr && sampling.size() != R) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} sampling settings for {} rows", sampling.size(), R));
  }
  if (!graph) {
    if (auto ok = p.launch_step(b, st, L, sampled != nullptr && all_greedy); !ok)
      return ok;
  } else {
    if (p.buffers_generation != before)
      graphs_cache_->by_rows.clear();  // buffers moved: every graph is stale
    auto& entry = graphs_cache_->by_rows[static_cast<std::int64_t>(R)];
    if (!entry.exec || entry.buffers != p.buffers_generation) {
      if (auto ok = p.check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                            "decode graph capture");
          !ok)
        return ok;
      const auto launched = p.launch_step(b, st, L, true);
      cudaGraph_t captured = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(s, &captured);
      if (!launched) {
        if (captured != nullptr)
          (void)cudaGraphDestroy(captured);
        return launched;
      }
      if (auto ok = p.check(ended, "decode graph capture"); !ok)
        return ok;
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made = cudaGraphInstantiate(&exec, captured, 0);
      (void)cudaGraphDestroy(captured);
      if (auto ok = p.check(made, "decode graph instantiate"); !ok)
        return ok;
      entry.exec.reset(exec);
      entry.buffers = p.buffers_generation;
    }
    if (auto ok = p.check(cudaGraphLaunch(entry.exec.get(), s), "decode graph launch"); !ok)
      return ok;
  }
  if (sampled != nullptr) {
    if (!all_greedy) {
      if (auto ok = p.sample(sampling); !ok)
        return ok;
    }
    sampled->resize(R);
    if (auto ok = p.check(cudaMemcpyAsync(sampled->data(), p.greedy.as<std::int32_t>(),
                                          R * sizeof(std::int32_t), cudaMemcpyDeviceToHost, s),
                          "sampled ids download");
        !ok)
      return ok;
  }
  if (logits != nullptr) {
    logits->resize(R * static_cast<std::size_t>(c.vocab_size));
    if (auto ok =
            p.check(cudaMemcpyAsync(logits->data(), p.logits.as<float>(),
                                    logits->size() * sizeof(float), cudaMemcpyDeviceToHost, s),
                    "logits download");
        !ok)
      return ok;
  }
  return p.stream.synchronize();
}

void nemotron_h_cuda::set_graphs(bool on, std::int64_t kv_pages) {
  graphs_ = on;
  kv_pages_ = kv_pages;
  graphs_cache_->by_rows.clear();
}

}  // namespace mstar::models

#else  // no CUDA in this build

#include "models/nemotron_h.hpp"

namespace mstar::models {

struct nemotron_h_cuda::impl {};
struct nemotron_h_cuda::graph_cache {};

nemotron_h_cuda::nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype) {}
void nemotron_h_cuda::set_graphs(bool, std::int64_t) {}
nemotron_h_cuda::~nemotron_h_cuda() = default;

result<std::unique_ptr<nemotron_h_cuda>> nemotron_h_cuda::make(int, mstar::dtype) {
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

}  // namespace mstar::models

#endif
