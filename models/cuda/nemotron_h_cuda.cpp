// nemotron_h_cuda: opening the device, uploading the weights, and a step:
// the plan upload, the decode graphs (captured once per row count, replayed
// after), sampling and the downloads. The launches live in
// nemotron_h_cuda_layers.cpp, the private state in internal/.
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <utility>

#include "kernels/cuda/device_arena.hpp"
#include "models/cuda/internal/nemotron_h_cuda_impl.hpp"

namespace mstar::models {
using kernels::matrix;

nemotron_h_cuda::nemotron_h_cuda(std::unique_ptr<impl> p, mstar::dtype dtype)
    : impl_(std::move(p)), dtype_(dtype), graphs_cache_(std::make_unique<graph_cache>()) {}

nemotron_h_cuda::~nemotron_h_cuda() {
  if (impl_)
    (void)impl_->stream.synchronize();
  graphs_cache_.reset();  // graphs before the buffers they address
}

result<std::unique_ptr<nemotron_h_cuda>> nemotron_h_cuda::make(int device, mstar::dtype dtype,
                                                               bool graphs) {
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
  auto model = std::unique_ptr<nemotron_h_cuda>(new nemotron_h_cuda(std::move(p), dtype));
  model->graphs_ = graphs;
  return model;
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

result<void> nemotron_h_cuda::forward(const nemotron_h_batch& b, const nemotron_h_state& st,
                                      std::vector<float>* logits,
                                      std::vector<std::int32_t>* sampled,
                                      std::span<const row_sampling> sampling) {
  auto& p = *impl_;
  // The calling thread may not be the one that loaded the model (the worker
  // actor's, an overlap engine's forward thread): make the device current.
  if (auto ok = kc::check(cudaSetDevice(p.device), "cudaSetDevice"); !ok)
    return ok.error();
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
  if (kp != nullptr) {
    // The split workspace depends on the table's sizes only: the host plan's
    // spans, laid out as the device reads them, carry them.
    const auto host = [&hp](std::size_t at, std::size_t n) {
      return std::span<const std::int32_t>{hp.data() + at, n};
    };
    const kernels::kv_page_table sizes{host(L.qo, R + 1), host(L.kvp, R + 1), host(L.kvi, L.n_kvi),
                                       host(L.lpl, R),    host(L.dp, L.n_dp), host(L.dop, L.n_dp)};
    const kernels::paged_attention_params probe{
        st.kv, 0, sizes, nullptr, nullptr, static_cast<std::int32_t>(c.num_attention_heads), 0.0F};
    if (auto ok = p.reserve_buffer(p.split, kc::paged_attention_workspace_bytes(probe)); !ok)
      return ok;
  }
  // The KV index region is last: only the pages this step addresses go up
  // (a decode graph's region has room for the whole pool).
  const std::size_t used = L.kvi + (kp != nullptr ? kp->kv_indices.size() : 0);
  if (p.tl) {
    if (auto ok = p.tl->start.record(s); !ok)
      return ok;
  }
  if (auto ok = p.check(cudaMemcpyAsync(p.plan.as<std::int32_t>(), hp.data(),
                                        used * sizeof(std::int32_t), cudaMemcpyHostToDevice, s),
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
  if (p.tl) {
    if (auto ok = p.tl->end.record(s); !ok)
      return ok;
  }
  if (auto ok = p.stream.synchronize(); !ok)
    return ok;
  if (p.tl) {
    auto& t = *p.tl;
    device_step_time step;
    auto busy = kc::event::elapsed_ms(t.start, t.end);
    if (!busy)
      return busy.error();
    step.busy_us = 1e3 * *busy;
    if (t.has_prev) {
      auto idle = kc::event::elapsed_ms(t.prev_end, t.start);
      if (!idle)
        return idle.error();
      step.idle_before_us = 1e3 * *idle;
    }
    t.steps.push_back(step);
    std::swap(t.end, t.prev_end);
    t.has_prev = true;
  }
  return {};
}

void nemotron_h_cuda::record_timeline(bool on) {
  auto& p = *impl_;
  if (!on) {
    p.tl.reset();
    return;
  }
  if (p.tl)
    return;
  if (!kc::check(cudaSetDevice(p.device), "cudaSetDevice"))
    return;
  auto start = kc::event::make();
  auto end = kc::event::make();
  auto prev = kc::event::make();
  if (!start || !end || !prev)
    return;  // no timeline: take_timeline stays empty
  p.tl = std::make_unique<impl::timeline>();
  p.tl->start = std::move(*start);
  p.tl->end = std::move(*end);
  p.tl->prev_end = std::move(*prev);
}

std::vector<device_step_time> nemotron_h_cuda::take_timeline() {
  auto& p = *impl_;
  if (!p.tl)
    return {};
  return std::exchange(p.tl->steps, {});
}

result<void> nemotron_h_cuda::load(const nemotron_h_config& config,
                                   const nemotron_h_host_weights& weights, std::int64_t kv_pages) {
  set_graphs(graphs_, kv_pages);
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

}  // namespace mstar::models

#endif
