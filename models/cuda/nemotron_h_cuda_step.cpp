// nemotron_h_cuda's steps: `launch` fills the forward's slot (its pinned
// plan), queues the upload, the loopback gather, the kernels or the decode
// graph (captured once per row count, replayed after), sampling and the
// downloads into the slot's pinned memory, and records the slot's event;
// `finish` waits on that event only. The device timeline lives here too.
//
// Stream order of two pipelined forwards (one stream): N's sampling ->
// N's copy of its draws into its slot's `drawn` -> N's downloads -> N's
// event -> N+1's upload -> N+1's gather (reads N's `drawn`) -> N+1's
// kernels. N+1 never writes N's slot, so N's draws survive N+1's reserve.
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <utility>

#include "models/cuda/internal/nemotron_h_cuda_impl.hpp"
#include "models/internal/mamba_params.hpp"

namespace mstar::models {
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
  l.loop = take(2 * rows);
  l.kvi = take(kvi_capacity);
  l.total = at;
  l.n_dp = n_dp;
  l.n_kvi = kvi_capacity;
  return l;
}

// Writes the step's plan into `hp` (L.total ints) and returns how many
// loopback pairs it holds.
std::size_t fill_plan(std::int32_t* hp, const step_layout& L, const nemotron_h_batch& b,
                      const nemotron_h_state& st, std::span<const std::int32_t> loopback) {
  std::fill(hp, hp + L.total, 0);
  const auto put = [hp](std::size_t at, std::span<const std::int32_t> a) {
    std::copy(a.begin(), a.end(), hp + at);
  };
  const auto R = b.cu.size() - 1;
  put(L.ids, b.ids);
  put(L.cu, b.cu);
  for (std::size_t r = 0; r < R; ++r)
    hp[L.last + r] = b.cu[r + 1] - 1;
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
    hp[L.loop + 2 * n] = b.cu[r];  // a looped-back row feeds one token
    hp[L.loop + 2 * n + 1] = loopback[r];
    ++n;
  }
  return n;
}

}  // namespace

result<void> nemotron_h_cuda::forward(const nemotron_h_batch& b, const nemotron_h_state& st,
                                      std::vector<float>* logits,
                                      std::vector<std::int32_t>* sampled,
                                      std::span<const row_sampling> sampling) {
  auto ticket = start(b, st, logits != nullptr, sampled != nullptr, sampling, {});
  if (!ticket)
    return ticket.error();
  return finish(*ticket, logits, sampled);
}

result<std::uint64_t> nemotron_h_cuda::launch(const nemotron_h_batch& b, const nemotron_h_state& st,
                                              bool want_logits,
                                              std::span<const row_sampling> sampling,
                                              std::span<const std::int32_t> loopback) {
  return start(b, st, want_logits, !want_logits, sampling, loopback);
}

result<std::uint64_t> nemotron_h_cuda::start(const nemotron_h_batch& b, const nemotron_h_state& st,
                                             bool logits, bool draws,
                                             std::span<const row_sampling> sampling,
                                             std::span<const std::int32_t> loopback) {
  auto& p = *impl_;
  // Checked before anything is queued: a refused launch leaves no trace.
  if (p.outstanding >= max_outstanding) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{}: {} forwards are outstanding already; finish the oldest first", p.name,
                    p.outstanding));
  }
  if (b.cu.empty())
    return make_error(errc::invalid_argument, "a step with no row offsets");
  const auto R = b.cu.size() - 1;
  if (draws && sampling.size() != R) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} sampling settings for {} rows", sampling.size(), R));
  }
  if (auto ok = check_loopback(b, loopback, p.last_drawn_rows); !ok)
    return ok.error();
  // The calling thread may not be the one that loaded the model (the worker
  // actor's, an overlap engine's forward thread): make the device current.
  if (auto ok = kc::check(cudaSetDevice(p.device), "cudaSetDevice"); !ok)
    return ok.error();
  const std::size_t index = p.next_ticket % p.forwards.size();
  auto& slot = p.forwards[index];
  if (slot.busy) {
    // Cannot happen while finish goes in order and at most two are out.
    return make_error(errc::internal,
                      fmt::format("{}: forward slot {} is still in flight", p.name, index));
  }
  if (auto queued = enqueue(index, b, st, logits, draws, sampling, loopback); !queued) {
    // Part of it may be queued, reading the slot's pinned memory that the
    // next launch refills: let it drain. No draws for a loopback to read.
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

result<void> nemotron_h_cuda::enqueue(std::size_t index, const nemotron_h_batch& b,
                                      const nemotron_h_state& st, bool logits, bool draws,
                                      std::span<const row_sampling> sampling,
                                      std::span<const std::int32_t> loopback) {
  auto& p = *impl_;
  auto& slot = p.forwards[index];
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
  if (kp != nullptr && kp->kv_indices.size() > kvi_capacity) {
    return make_error(errc::out_of_range, fmt::format("step addresses {} pages, the pool holds {}",
                                                      kp->kv_indices.size(), kvi_capacity));
  }
  const step_layout L = layout_for(T, R, n_dp, kvi_capacity);
  // The slot's own pinned plan: its upload is still queued when launch
  // returns, and the other slot's forward may be reading the other one.
  if (auto ok = impl::reserve_pinned(slot.plan, L.total * sizeof(std::int32_t)); !ok)
    return ok;
  auto* hp = slot.plan.as<std::int32_t>();
  const std::size_t looped = fill_plan(hp, L, b, st, loopback);
  // The plan kernel finds the loopback rows by their ids: -2 - the drawn
  // row, and no other id below -1 (a bad id reads zeros either way).
  const std::int32_t* mapped = nullptr;
  if (p.plan_kernel != 0) {
    void* dev = nullptr;
    if (auto ok = p.check(cudaHostGetDevicePointer(&dev, hp, 0), "plan kernel: mapped plan"); !ok)
      return ok;
    mapped = static_cast<const std::int32_t*>(dev);
    for (std::size_t i = 0; i < T; ++i)
      hp[L.ids + i] = std::max(hp[L.ids + i], -1);
    for (std::size_t n = 0; n < looped; ++n)
      hp[L.ids + hp[L.loop + 2 * n]] = -2 - hp[L.loop + 2 * n + 1];
  }
  if (!slot.done.get()) {
    auto done = kc::event::make(false);
    if (!done)
      return done.error();
    slot.done = std::move(*done);
  }
  const std::uint64_t before = p.buffers_generation;
  if (auto ok = p.reserve(static_cast<std::int64_t>(T), static_cast<std::int64_t>(R), L.total); !ok)
    return ok;
  if (!b.decode && p.chunked_ssd()) {
    // Not read by graphs: only prefill steps, never captured, pass it.
    const std::size_t bytes =
        kc::ssd_scan_workspace_bytes(internal::ssd_weights_of(c, nullptr, nullptr, nullptr),
                                     static_cast<std::int64_t>(T), static_cast<std::int64_t>(R));
    if (auto ok = p.reserve_buffer(p.ssd_scratch, bytes, false); !ok)
      return ok;
  }
  // Direct draws: the graph's argmax writes the slot's `drawn` (a graph a
  // slot), so moving it retires the graphs. Otherwise the copy after
  // sampling writes it, and no graph reads it.
  const bool direct = p.direct_draws;
  if (draws || (direct && graph)) {
    if (auto ok = p.reserve_buffer(slot.drawn, R * sizeof(std::int32_t), direct); !ok)
      return ok;
  }
  p.draws_to =
      direct && (draws || graph) ? slot.drawn.as<std::int32_t>() : p.greedy.as<std::int32_t>();
  if (kp != nullptr) {
    // The split workspace depends on the table's sizes only: the host plan's
    // spans, laid out as the device reads them, carry them.
    const auto host = [hp](std::size_t at, std::size_t n) {
      return std::span<const std::int32_t>{hp + at, n};
    };
    const kernels::kv_page_table sizes{host(L.qo, R + 1), host(L.kvp, R + 1), host(L.kvi, L.n_kvi),
                                       host(L.lpl, R),    host(L.dp, L.n_dp), host(L.dop, L.n_dp)};
    const kernels::paged_attention_params probe{
        st.kv, 0, sizes, nullptr, nullptr, static_cast<std::int32_t>(c.num_attention_heads), 0.0F};
    const void* had = p.split.buffer.data();
    if (auto ok = p.reserve_buffer(p.split, kc::paged_attention_workspace_bytes(probe)); !ok)
      return ok;
    // A fresh workspace's merge counters start at zero (the kernels keep them so).
    if (p.split.buffer.data() != had) {
      if (auto ok = p.check(
              kc::clear_paged_attention_workspace(p.split.buffer.data(), p.split.buffer.size(), s),
              "split workspace");
          !ok)
        return ok;
    }
  }
  slot.timed = 0;
  if (p.tl) {
    if (auto ok = p.tl->start[index].record(s); !ok)
      return ok;
    slot.timed = p.tl->generation;
  }
  // The KV index region is last: only the pages this step addresses go up
  // (a decode graph's region has room for the whole pool). The loopback
  // pairs sit before it.
  const std::size_t used = L.kvi + (kp != nullptr ? kp->kv_indices.size() : 0);
  auto* dplan = p.plan.as<std::int32_t>();
  kc::plan_upload_params up{dplan,
                            mapped,
                            static_cast<std::int64_t>(used),
                            static_cast<std::int64_t>(L.ids),
                            static_cast<std::int64_t>(L.ids + T),
                            looped > 0 ? p.last_drawn->as<const std::int32_t>() : nullptr,
                            looped > 0 ? static_cast<std::int64_t>(p.last_drawn_rows) : 0};
  // MSTAR_PLAN_INLINE=1: a small plan rides in the kernel's parameters.
  if (mapped != nullptr && p.plan_inline &&
      used <= static_cast<std::size_t>(kc::plan_inline_capacity)) {
    up.inlined = true;
    std::copy(hp, hp + used, up.inline_plan);
  }
  // MSTAR_PLAN_KERNEL=2: a decode graph holds the plan kernel itself.
  const bool plan_in_graph = graph && p.plan_kernel == 2;
  if (plan_in_graph) {
    // Launched as the graph's first node below.
  } else if (mapped != nullptr) {
    if (auto ok = p.check(kc::upload_plan(up, s), "plan kernel"); !ok)
      return ok;
  } else if (auto ok = p.check(
                 cudaMemcpyAsync(dplan, hp, used * sizeof(std::int32_t), cudaMemcpyHostToDevice, s),
                 "step upload");
             !ok) {
    return ok;
  }
  if (looped > 0 && mapped == nullptr) {
    // After the upload (it would overwrite the ids) and before the kernels
    // or the graph, which read the ids from the plan; never captured.
    const kc::loopback_params lp{dplan + L.ids, dplan + L.loop,
                                 p.last_drawn->as<const std::int32_t>(),
                                 static_cast<std::int64_t>(looped)};
    if (auto ok = p.check(kc::loopback_ids(lp, s), "loopback gather"); !ok)
      return ok;
  }
  const bool all_greedy = std::all_of(sampling.begin(), sampling.end(),
                                      [](const row_sampling& r) { return r.temperature == 0.0F; });
  if (!graph) {
    if (auto ok = p.launch_step(b, st, L, draws && all_greedy); !ok)
      return ok;
  } else {
    if (p.buffers_generation != before)
      graphs_cache_->by_rows.clear();  // buffers moved: every graph is stale
    const auto key = cuda_detail::graph_key(R, index, p.forwards.size(), direct);
    auto& entry = graphs_cache_->by_rows[key];
    if (!entry.exec || entry.buffers != p.buffers_generation) {
      if (auto ok = p.check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                            "decode graph capture");
          !ok)
        return ok;
      // The plan kernel first (its node the graph's one root), then the step.
      result<void> launched = {};
      if (plan_in_graph)
        launched = p.check(kc::upload_plan(up, s), "plan kernel capture");
      if (launched)
        launched = p.launch_step(b, st, L, true);
      cudaGraph_t captured = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(s, &captured);
      std::unique_ptr<CUgraph_st, cuda_detail::graph_deleter> owned(captured);
      if (!launched)
        return launched;
      if (auto ok = p.check(ended, "decode graph capture"); !ok)
        return ok;
      cudaGraphNode_t root = nullptr;
      if (plan_in_graph) {
        std::size_t roots = 0;
        if (auto ok = p.check(cudaGraphGetRootNodes(captured, nullptr, &roots), "plan kernel node");
            !ok)
          return ok;
        if (roots == 1) {
          if (auto ok = p.check(cudaGraphGetRootNodes(captured, &root, &roots), "plan kernel node");
              !ok)
            return ok;
        }
        if (roots != 1 || root == nullptr) {
          return make_error(
              errc::internal,
              fmt::format("decode graph: {} roots, not the plan kernel alone", roots));
        }
      }
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made = cudaGraphInstantiate(&exec, captured, 0);
      if (auto ok = p.check(made, "decode graph instantiate"); !ok)
        return ok;
      entry.exec.reset(exec);
      entry.buffers = p.buffers_generation;
      entry.graph = plan_in_graph ? std::move(owned) : nullptr;
      entry.plan_node = root;
    }
    if (plan_in_graph) {
      if (auto ok = p.check(kc::set_upload_plan_node(entry.exec.get(), entry.plan_node, up),
                            "plan kernel node");
          !ok)
        return ok;
    }
    if (auto ok = p.check(cudaGraphLaunch(entry.exec.get(), s), "decode graph launch"); !ok)
      return ok;
  }
  slot.n_ids = 0;
  slot.n_logits = 0;
  // Side downloads: the draws alone (logits stay on the step's stream, whose
  // next head overwrites them) cross on `copies` once the step's event says
  // they are written; `done` is then recorded there.
  const bool side = p.copies.get() != nullptr && draws && !logits;
  cudaStream_t ds = s;
  if (draws) {
    if (!all_greedy) {
      if (auto ok = p.sample(sampling, slot); !ok)
        return ok;
    }
    // The draws are in the slot's own `drawn` (direct) or leave `greedy`
    // for it (the next forward's loopback reads it, whatever that forward's
    // reserve does to `greedy`), then cross to pinned memory.
    const auto bytes = R * sizeof(std::int32_t);
    if (auto ok = impl::reserve_pinned(slot.ids, bytes); !ok)
      return ok;
    const auto check = [&p](cudaError_t err, std::string_view what) { return p.check(err, what); };
    auto queued = cuda_detail::download_draws(slot, p.greedy, direct, bytes, s,
                                              side ? p.copies.get() : nullptr, check);
    if (!queued)
      return queued.error();
    ds = *queued;
    slot.n_ids = R;
  }
  if (logits) {
    const std::size_t n = R * static_cast<std::size_t>(c.vocab_size);
    if (auto ok = impl::reserve_pinned(slot.logits, n * sizeof(float)); !ok)
      return ok;
    if (auto ok = p.check(cudaMemcpyAsync(slot.logits.data(), p.logits.as<float>(),
                                          n * sizeof(float), cudaMemcpyDeviceToHost, s),
                          "logits download");
        !ok)
      return ok;
    slot.n_logits = n;
  }
  if (slot.timed != 0) {
    if (auto ok = p.tl->end[index].record(s); !ok)
      return ok;
  }
  return slot.done.record(ds);
}

result<void> nemotron_h_cuda::finish(std::uint64_t ticket, std::vector<float>* logits,
                                     std::vector<std::int32_t>* sampled) {
  auto& p = *impl_;
  if (p.outstanding == 0 || ticket != p.next_ticket - p.outstanding) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{}: forward {} is not the oldest outstanding one", p.name, ticket));
  }
  const std::size_t index = ticket % p.forwards.size();
  auto& slot = p.forwards[index];
  if (auto ok = kc::check(cudaSetDevice(p.device), "cudaSetDevice"); !ok)
    return ok.error();
  // This forward's event only: the next one may already be queued behind it.
  const auto waited = slot.done.synchronize();
  slot.busy = false;  // over either way: its slot is free
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
  if (!p.tl)
    return {};
  auto& t = *p.tl;
  if (slot.timed != t.generation) {
    t.has_prev = false;  // launched before this timeline started
    return {};
  }
  device_step_time step;
  auto busy = kc::event::elapsed_ms(t.start[index], t.end[index]);
  if (!busy)
    return busy.error();
  step.busy_us = 1e3 * *busy;
  if (t.has_prev) {
    auto idle = kc::event::elapsed_ms(t.prev_end, t.start[index]);
    if (!idle)
      return idle.error();
    step.idle_before_us = 1e3 * *idle;
  }
  t.steps.push_back(step);
  // Kept apart from the slot's pair: the launch after next reuses the slot
  // (and records into its end event) before the next forward finishes.
  std::swap(t.end[index], t.prev_end);
  t.has_prev = true;
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
  auto t = std::make_unique<impl::timeline>();
  for (std::size_t i = 0; i < t->start.size(); ++i) {
    auto start = kc::event::make();
    auto end = kc::event::make();
    if (!start || !end)
      return;  // no timeline: take_timeline stays empty
    t->start[i] = std::move(*start);
    t->end[i] = std::move(*end);
  }
  auto prev = kc::event::make();
  if (!prev)
    return;
  t->prev_end = std::move(*prev);
  t->generation = ++p.timelines;
  p.tl = std::move(t);
}

std::vector<device_step_time> nemotron_h_cuda::take_timeline() {
  auto& p = *impl_;
  if (!p.tl)
    return {};
  return std::exchange(p.tl->steps, {});
}

}  // namespace mstar::models

#endif
