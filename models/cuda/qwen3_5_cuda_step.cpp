// qwen3_5_cuda's steps, as nemotron_h_cuda_step.cpp: `launch` fills the
// forward's slot (its pinned plan: ids, row offsets, M-RoPE positions, the
// KV and recurrent addressing), queues the upload, the loopback gather, the
// kernels or the decode graph (captured once per row count), sampling and
// the downloads into the slot's pinned memory, then records the slot's
// event; `finish` waits on that event only.
#include "models/cuda/qwen3_5_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <utility>

#include "models/cuda/internal/qwen3_5_cuda_impl.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;
using qwen_cuda::step_layout;

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
  l.pos = take(3 * tokens);
  l.qo = take(rows + 1);
  l.kvp = take(rows + 1);
  l.lpl = take(rows);
  l.dp = take(n_dp);
  l.dop = take(n_dp);
  l.slots = take(rows);
  l.has = take((rows + 3) / 4);
  l.loop = take(2 * rows);
  l.kvi = take(kvi_capacity);
  l.total = at;
  l.n_dp = n_dp;
  l.n_kvi = kvi_capacity;
  return l;
}

std::size_t fill_plan(std::int32_t* hp, const step_layout& L, const qwen3_5_step& st,
                      std::span<const std::int32_t> loopback) {
  std::fill(hp, hp + L.total, 0);
  const auto put = [hp](std::size_t at, std::span<const std::int32_t> a) {
    std::copy(a.begin(), a.end(), hp + at);
  };
  const auto R = st.cu.size() - 1;
  put(L.ids, st.ids);
  put(L.cu, st.cu);
  for (std::size_t r = 0; r < R; ++r)
    hp[L.last + r] = st.cu[r + 1] - 1;
  put(L.pos, st.positions);
  if (const auto* kp = st.kv_plan; kp != nullptr) {
    put(L.qo, kp->qo_indptr);
    put(L.kvp, kp->kv_indptr);
    put(L.lpl, kp->last_page_len);
    put(L.dp, kp->decode_page);
    put(L.dop, kp->decode_offset);
    put(L.kvi, kp->kv_indices);
  }
  if (st.rec != nullptr) {
    put(L.slots, std::span{st.rec->slot_indices}.first(R));
    std::memcpy(hp + L.has, st.rec->has_state.data(), R);
  }
  std::size_t n = 0;
  for (std::size_t r = 0; r < loopback.size(); ++r) {
    if (loopback[r] < 0)
      continue;
    hp[L.loop + 2 * n] = st.cu[r];
    hp[L.loop + 2 * n + 1] = loopback[r];
    ++n;
  }
  return n;
}

}  // namespace

result<std::uint64_t> qwen3_5_cuda::launch(const qwen3_5_step& st, bool want_logits,
                                           std::span<const row_sampling> sampling,
                                           std::span<const std::int32_t> loopback) {
  auto& p = *impl_;
  if (p.outstanding >= nemotron_h_backend::max_outstanding) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{}: {} forwards are outstanding already; finish the oldest first", p.name,
                    p.outstanding));
  }
  if (st.cu.size() < 2)
    return make_error(errc::invalid_argument, "a step with no rows");
  const auto R = st.cu.size() - 1;
  const bool draws = !want_logits;
  if (draws && sampling.size() != R) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} sampling settings for {} rows", sampling.size(), R));
  }
  if (auto ok = check_loopback({st.ids, st.cu, st.decode}, loopback, p.last_drawn_rows); !ok)
    return ok.error();
  if (auto ok = kc::check(cudaSetDevice(p.device), "cudaSetDevice"); !ok)
    return ok.error();
  const std::size_t index = p.next_ticket % p.forwards.size();
  auto& slot = p.forwards[index];
  if (slot.busy)
    return make_error(errc::internal,
                      fmt::format("{}: forward slot {} is in flight", p.name, index));
  if (auto queued = p.enqueue(index, st, want_logits, sampling, loopback); !queued) {
    (void)p.stream.synchronize();
    if (p.copies.get() != nullptr)
      (void)p.copies.synchronize();
    p.last_drawn_rows = 0;
    p.last_drawn = nullptr;
    return queued.error();
  }
  slot.ticket = p.next_ticket++;
  slot.busy = true;
  ++p.outstanding;
  p.last_drawn_rows = draws ? R : 0;
  p.last_drawn = draws ? &slot.drawn : nullptr;
  return slot.ticket;
}

result<void> qwen3_5_cuda::impl::enqueue(std::size_t index, const qwen3_5_step& st,
                                         bool want_logits, std::span<const row_sampling> sampling,
                                         std::span<const std::int32_t> loopback) {
  auto& slot = forwards[index];
  const cudaStream_t s = stream.get();
  const auto T = st.ids.size();
  const auto R = st.cu.size() - 1;
  const bool draws = !want_logits;
  const auto* kp = st.kv_plan;
  const bool images = std::any_of(st.embed_rows.begin(), st.embed_rows.end(),
                                  [](const float* e) { return e != nullptr; });
  const bool graph = graphs && st.decode && !images && (kp == nullptr || kp->decode);
  const std::size_t n_dp = kp != nullptr ? kp->decode_page.size() : 0;
  const std::size_t kvi_capacity = kp == nullptr ? 0
                                   : graph       ? static_cast<std::size_t>(kv_pages)
                                                 : kp->kv_indices.size();
  if (kp != nullptr && kp->kv_indices.size() > kvi_capacity) {
    return make_error(errc::out_of_range, fmt::format("step addresses {} pages, the pool holds {}",
                                                      kp->kv_indices.size(), kvi_capacity));
  }
  if (st.positions.size() != 3 * T && kp != nullptr) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} rotary positions for {} tokens", st.positions.size(), T));
  }
  const step_layout L = layout_for(T, R, n_dp, kvi_capacity);
  if (auto ok = reserve_pinned(slot.plan, L.total * sizeof(std::int32_t)); !ok)
    return ok;
  auto* hp = slot.plan.as<std::int32_t>();
  const std::size_t looped = fill_plan(hp, L, st, loopback);
  if (!slot.done.get()) {
    auto done = kc::event::make(false);
    if (!done)
      return done.error();
    slot.done = std::move(*done);
  }
  const std::uint64_t before = buffers_generation;
  if (auto ok = reserve(static_cast<std::int64_t>(T), static_cast<std::int64_t>(R), L.total); !ok)
    return ok;
  // Direct draws: the graph's argmax writes the slot's `drawn` (a graph a
  // slot), so moving it retires the graphs. Otherwise the copy after
  // sampling writes it, and no graph reads it.
  const bool direct = direct_draws;
  if (draws || (direct && graph)) {
    if (auto ok = reserve_buffer(slot.drawn, R * sizeof(std::int32_t), direct); !ok)
      return ok;
  }
  draws_to = direct && (draws || graph) ? slot.drawn.as<std::int32_t>() : greedy.as<std::int32_t>();
  if (!st.decode && chunked_delta_rule()) {
    const std::size_t bytes = kc::gated_delta_rule_workspace_bytes(
        delta_shape(), static_cast<std::int64_t>(T), static_cast<std::int64_t>(R));
    if (auto ok = reserve_buffer(rule_scratch, bytes, false); !ok)
      return ok;
  }
  if (kp != nullptr) {
    const auto host = [hp](std::size_t at, std::size_t n) {
      return std::span<const std::int32_t>{hp + at, n};
    };
    const kernels::kv_page_table sizes{host(L.qo, R + 1), host(L.kvp, R + 1), host(L.kvi, L.n_kvi),
                                       host(L.lpl, R),    host(L.dp, L.n_dp), host(L.dop, L.n_dp)};
    const kernels::paged_attention_params probe{
        st.kv, 0, sizes, nullptr, nullptr, static_cast<std::int32_t>(config.num_attention_heads),
        0.0F};
    const void* had = split.buffer.data();
    if (auto ok = reserve_buffer(split, kc::paged_attention_workspace_bytes(probe)); !ok)
      return ok;
    // A fresh workspace's merge counters start at zero (the kernels keep them so).
    if (split.buffer.data() != had) {
      if (auto ok = check(
              kc::clear_paged_attention_workspace(split.buffer.data(), split.buffer.size(), s),
              "split workspace");
          !ok)
        return ok;
    }
  }
  const std::size_t used = L.kvi + (kp != nullptr ? kp->kv_indices.size() : 0);
  auto* dplan = plan.as<std::int32_t>();
  if (auto ok =
          check(cudaMemcpyAsync(dplan, hp, used * sizeof(std::int32_t), cudaMemcpyHostToDevice, s),
                "step upload");
      !ok)
    return ok;
  if (looped > 0) {
    const kc::loopback_params lp{dplan + L.ids, dplan + L.loop,
                                 last_drawn->as<const std::int32_t>(),
                                 static_cast<std::int64_t>(looped)};
    if (auto ok = check(kc::loopback_ids(lp, s), "loopback gather"); !ok)
      return ok;
  }
  const bool all_greedy = std::all_of(sampling.begin(), sampling.end(),
                                      [](const row_sampling& r) { return r.temperature == 0.0F; });
  if (!graph) {
    if (auto ok = launch_step(st, L, draws && all_greedy); !ok)
      return ok;
  } else {
    if (buffers_generation != before)
      graph_by_rows.clear();  // buffers moved: every graph is stale
    const auto key = cuda_detail::graph_key(R, index, forwards.size(), direct);
    auto& entry = graph_by_rows[key];
    if (!entry.exec || entry.buffers != buffers_generation) {
      if (auto ok = check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                          "decode graph capture");
          !ok)
        return ok;
      const auto launched = launch_step(st, L, true);
      cudaGraph_t captured = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(s, &captured);
      if (!launched) {
        if (captured != nullptr)
          (void)cudaGraphDestroy(captured);
        return launched;
      }
      if (auto ok = check(ended, "decode graph capture"); !ok)
        return ok;
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made = cudaGraphInstantiate(&exec, captured, 0);
      (void)cudaGraphDestroy(captured);
      if (auto ok = check(made, "decode graph instantiate"); !ok)
        return ok;
      entry.exec.reset(exec);
      entry.buffers = buffers_generation;
    }
    if (auto ok = check(cudaGraphLaunch(entry.exec.get(), s), "decode graph launch"); !ok)
      return ok;
  }
  slot.n_ids = 0;
  slot.n_logits = 0;
  cudaStream_t done_on = s;
  if (draws) {
    if (!all_greedy) {
      if (auto ok = sample(sampling, slot); !ok)
        return ok;
    }
    const auto bytes = R * sizeof(std::int32_t);
    if (auto ok = reserve_pinned(slot.ids, bytes); !ok)
      return ok;
    // Side downloads (`copies`): the draws cross on the second stream and
    // `done` is recorded there.
    const auto checked = [this](cudaError_t err, std::string_view what) {
      return check(err, what);
    };
    auto queued =
        cuda_detail::download_draws(slot, greedy, direct, bytes, s, copies.get(), checked);
    if (!queued)
      return queued.error();
    done_on = *queued;
    slot.n_ids = R;
  } else {
    const std::size_t n = R * static_cast<std::size_t>(config.vocab_size);
    if (auto ok = reserve_pinned(slot.logits, n * sizeof(float)); !ok)
      return ok;
    if (auto ok = check(cudaMemcpyAsync(slot.logits.data(), logits.as<float>(), n * sizeof(float),
                                        cudaMemcpyDeviceToHost, s),
                        "logits download");
        !ok)
      return ok;
    slot.n_logits = n;
  }
  return slot.done.record(done_on);
}

result<void> qwen3_5_cuda::finish(std::uint64_t ticket, std::vector<float>* logits,
                                  std::vector<std::int32_t>* sampled) {
  auto& p = *impl_;
  if (p.outstanding == 0 || ticket != p.next_ticket - p.outstanding) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{}: forward {} is not the oldest outstanding one", p.name, ticket));
  }
  auto& slot = p.forwards[ticket % p.forwards.size()];
  if (auto ok = kc::check(cudaSetDevice(p.device), "cudaSetDevice"); !ok)
    return ok.error();
  const auto waited = slot.done.synchronize();
  slot.busy = false;
  --p.outstanding;
  if (!waited)
    return waited.error().with_context(p.name);
  if (sampled != nullptr) {
    const auto* ids = slot.ids.as<const std::int32_t>();
    sampled->assign(ids, ids + slot.n_ids);
  }
  if (logits != nullptr) {
    const auto* l = slot.logits.as<const float>();
    logits->assign(l, l + slot.n_logits);
  }
  return {};
}

}  // namespace mstar::models

#endif
