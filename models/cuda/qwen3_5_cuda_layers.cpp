// qwen3_5_cuda's launches: the GEMM, norms, the gated delta net, gated
// attention, the SwiGLU MLP, sampling and one whole step (what a decode graph
// captures). Mirrors models/qwen3_5_cpu.cpp step for step.
#include "models/cuda/qwen3_5_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "kernels/math.hpp"
#include "models/cuda/internal/qwen3_5_cuda_impl.hpp"

namespace mstar::models {
namespace kc = kernels::cuda;
using kernels::matrix;
using kernels::vector;
using qwen_cuda::layer;
using qwen_cuda::step_layout;

result<void> qwen3_5_cuda::impl::linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                        float* out_rows, bool accumulate) {
  const auto r =
      cuda_detail::launch_linear(blas, dtype, xb, in, t, w, out_rows, accumulate, stream.get());
  return check(r.err, r.what);
}

result<void> qwen3_5_cuda::impl::add_norm(float* residual, const float* delta, std::int64_t rows,
                                          const kc::device_buffer& weight, float* f32_out) {
  const std::int64_t hid = config.hidden_size;
  kernels::add_rms_norm_params p;
  p.residual = matrix(residual, rows, hid);
  if (delta != nullptr)
    p.delta = matrix(delta, rows, hid);
  p.weight = vector(weight.as<const float>(), hid);
  if (dtype == mstar::dtype::float32)
    p.out = matrix(f32_out, rows, hid);
  else
    p.out_bf16 = matrix(xb.as<std::uint16_t>(), rows, hid);
  p.eps = static_cast<float>(config.rms_norm_eps);
  return check(kc::add_rms_norm(p, stream.get()), "add_rms_norm");
}

kernels::gated_delta_weights qwen3_5_cuda::impl::delta_shape() const {
  const auto geo = config.delta_net();
  kernels::gated_delta_weights w;
  w.num_k_heads = static_cast<std::int32_t>(geo.num_k_heads);
  w.num_v_heads = static_cast<std::int32_t>(geo.num_v_heads);
  w.head_k_dim = static_cast<std::int32_t>(geo.head_k_dim);
  w.head_v_dim = static_cast<std::int32_t>(geo.head_v_dim);
  return w;
}

result<void> qwen3_5_cuda::impl::delta_net(const layer& l, const layer_io& io,
                                           const qwen3_5_step& st, const step_layout& L) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const auto geo = c.delta_net();
  const auto T = static_cast<std::int64_t>(st.ids.size());
  const std::int64_t cd = geo.conv_dim(), vd = c.value_dim(), HV = c.linear_num_value_heads;
  const std::int64_t proj_n = cd + vd + 2 * HV;
  float* pr = proj.as<float>();
  float* cv = conv.as<float>();
  float* ru = rule.as<float>();
  const auto* dplan = plan.as<const std::int32_t>();
  const auto rows = st.cu.size() - 1;
  const std::span<const std::int32_t> slots{dplan + L.slots, rows};
  const std::span<const std::uint8_t> has{reinterpret_cast<const std::uint8_t*>(dplan + L.has),
                                          rows};
  const std::span<const std::int32_t> cu{dplan + L.cu, rows + 1};
  const kernels::conv_weights cw{l.conv_w.as<const float>(), nullptr, static_cast<std::int32_t>(cd),
                                 static_cast<std::int32_t>(c.linear_conv_kernel_dim), true};
  float* conv_state = st.conv_state[static_cast<std::size_t>(l.sub_index)];
  // in_proj, then the conv over its q / k / v features (folded into one GEMV
  // in a batch-1 decode step where conv_fold is on).
  const auto projected =
      cuda_detail::in_proj_and_conv(blas, dtype, xb, conv_fold, st.decode, io.in, T, l.in_proj, pr,
                                    {cw, 0, cv, conv_state, slots, has}, cu, s);
  if (auto ok = check(projected.err, projected.what); !ok)
    return ok;
  kernels::gated_delta_weights gw = delta_shape();
  gw.a_log = l.a_log.as<const float>();
  gw.dt_bias = l.dt_bias.as<const float>();
  const float* ab = pr + cd + vd;  // b columns, then a
  const kernels::gated_delta_rule_params rp{gw,
                                            {cv, cd, ab + HV, ab, proj_n},
                                            ru,
                                            cu,
                                            st.delta_state[static_cast<std::size_t>(l.sub_index)],
                                            slots,
                                            has,
                                            st.decode};
  kc::gated_delta_workspace ws;
  if (!st.decode && chunked_delta_rule())
    ws = {rule_scratch.buffer.data(), rule_scratch.buffer.size(), T, 0};
  if (auto ok = check(kc::gated_delta_rule_varlen(rp, ws, s), "gated delta rule"); !ok)
    return ok;
  kernels::head_gated_rms_norm_params g{ru,
                                        pr + cd,
                                        proj_n,
                                        l.gnorm.as<const float>(),
                                        dtype == mstar::dtype::float32 ? ru : nullptr,
                                        staged_bf16(),
                                        T,
                                        static_cast<std::int32_t>(HV),
                                        static_cast<std::int32_t>(geo.head_v_dim),
                                        static_cast<float>(c.rms_norm_eps)};
  if (auto ok = check(kc::head_gated_rms_norm(g, s), "head gated norm"); !ok)
    return ok;
  return linear(staged(ru), T, l.out_proj, io.out, io.accumulate);
}

result<void> qwen3_5_cuda::impl::attention(const layer& l, const layer_io& io,
                                           const qwen3_5_step& st, const step_layout& L,
                                           const kernels::kv_page_table& table) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const auto T = static_cast<std::int64_t>(st.ids.size());
  const std::int64_t D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  float* qgp = qg.as<float>();
  float* qq = q.as<float>();
  float* kk = k.as<float>();
  float* vv = v.as<float>();
  float* oo = o.as<float>();
  const gemm_input xs = io.in;
  // One token: q (with its gate), k and v in one product, a row [q | k |
  // v] in `qg` (sized for it); more: three products into their own rows.
  if (T == 1 && fused_qkv) {
    if (auto ok = linear(xs, T, l.qkv, qgp); !ok)
      return ok;
    kk = qgp + l.q.rows;
    vv = kk + l.k.rows;
  } else {
    if (auto ok = linear(xs, T, l.q, qgp); !ok)
      return ok;
    if (auto ok = linear(xs, T, l.k, kk); !ok)
      return ok;
    if (auto ok = linear(xs, T, l.v, vv); !ok)
      return ok;
  }
  const auto eps = static_cast<float>(c.rms_norm_eps);
  // The queries sit in the first D of each head's 2 D projection columns:
  // the norm reads them strided and writes them packed.
  const kernels::view<const float, 2> q_in{qgp, {T * Hq, D}, {2 * D, 1}};
  if (auto ok =
          check(kc::rms_norm(
                    {q_in, vector(l.q_norm.as<const float>(), D), matrix(qq, T * Hq, D), eps}, s),
                "q norm");
      !ok)
    return ok;
  auto kv2 = matrix(kk, T * Hkv, D);
  if (auto ok =
          check(kc::rms_norm({kv2, vector(l.k_norm.as<const float>(), D), kv2, eps}, s), "k norm");
      !ok)
    return ok;
  const auto* dplan = plan.as<const std::int32_t>();
  const kernels::view<const std::int32_t, 2> pos{dplan + L.pos, {3, T}, {T, 1}};
  const std::int64_t half = c.rotary_dim() / 2;
  const kernels::view<const float, 1> freq{inv_freq.as<const float>(), {half}, {1}};
  for (const auto& [buf, heads] : {std::pair{qq, Hq}, std::pair{kk, Hkv}}) {
    kernels::mrope_params rp{{buf, {T, heads, D}, {heads * D, D, 1}}, pos, freq, {}};
    std::copy(c.mrope_section.begin(), c.mrope_section.end(), rp.sections);
    if (auto ok = check(kc::mrope(rp, s), "mrope"); !ok)
      return ok;
  }
  if (auto ok = check(kc::append_kv({st.kv, l.sub_index, table, kk, vv}, s), "append_kv"); !ok)
    return ok;
  const kernels::paged_attention_params ap{
      st.kv, l.sub_index, table, qq, oo, static_cast<std::int32_t>(Hq), 0.0F};
  if (auto ok = check(kc::paged_attention(ap, split.buffer.data(), split.buffer.size(), s),
                      "paged_attention");
      !ok)
    return ok;
  const kernels::output_gate_params g{oo,
                                      qgp + D,
                                      Hq * 2 * D,
                                      2 * D,
                                      dtype == mstar::dtype::float32 ? oo : nullptr,
                                      staged_bf16(),
                                      T,
                                      static_cast<std::int32_t>(Hq),
                                      static_cast<std::int32_t>(D)};
  if (auto ok = check(kc::output_gate(g, s), "output gate"); !ok)
    return ok;
  return linear(staged(oo), T, l.o, io.out, io.accumulate);
}

result<void> qwen3_5_cuda::impl::mlp(const layer& l, const layer_io& io, std::int64_t tokens) {
  const cudaStream_t s = stream.get();
  const std::int64_t I = config.intermediate_size;
  float* gu = inter.as<float>();
  if (auto ok = linear(io.in, tokens, l.gate_up, gu); !ok)
    return ok;
  // Folded (the step's GEMVs norm their own input): down's GEMV takes
  // silu(gate) * up itself, where that equals the two launches below bit
  // for bit.
  if (io.in.norm_of != nullptr && f32_folds.act) {
    const gemm_input activated{
        .f32 = gu, .fold_f32 = true, .act = kernels::activation::silu, .up = gu + I};
    if (cuda_detail::f32_fold_fits(activated, tokens, l.down, io.out, io.accumulate))
      return linear(activated, tokens, l.down, io.out, io.accumulate);
  }
  // [gate | up] per token: silu(gate) * up in one pass, into `act` [tokens,
  // I] (f32 weights) or straight into the down GEMM's bf16 input.
  kernels::activation_params a;
  a.x = {gu, {tokens, I}, {2 * I, 1}};
  a.up = {gu + I, {tokens, I}, {2 * I, 1}};
  if (std::uint16_t* b16 = staged_bf16(); b16 != nullptr)
    a.out_bf16 = matrix(b16, tokens, I);
  else
    a.out = matrix(act.as<float>(), tokens, I);
  a.fn = kernels::activation::silu;
  if (auto ok = check(kc::activate(a, s), "swiglu"); !ok)
    return ok;
  return linear(staged(act.as<float>()), tokens, l.down, io.out, io.accumulate);
}

result<void> qwen3_5_cuda::impl::launch_step(const qwen3_5_step& st, const step_layout& L,
                                             bool argmax) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const auto T = static_cast<std::int64_t>(st.ids.size());
  const auto R = static_cast<std::int64_t>(st.cu.size()) - 1;
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
  float* hh = h.as<float>();
  float* oo = out.as<float>();
  // The residual stream: each block's output (`out`) is added to h by the
  // next norm (`pending`), which writes the block's GEMM input. Folded (one
  // row, bf16 weights): each block's first GEMVs norm h themselves and its
  // last adds onto h, so no norm kernel runs between them (and nothing writes
  // or reads out or last); the first block's first GEMV looks the token up
  // too (embed_fold), unless an image row replaces it. The norm weights hold
  // 1 + w already (models/qwen3_5.cpp adds the one at load), so both forms
  // take them as they are: the plain x * rsqrt(mean(x^2) + eps) * w.
  const bool fold = fused_norms && T == 1 && R == 1 && st.decode &&
                    dtype == mstar::dtype::bfloat16 && hid % 8 == 0 &&
                    hid <= kc::rms_norm_linear_max_k;
  const bool lookup_folded = fold && embed_fold && !layers.empty() &&
                             std::all_of(st.embed_rows.begin(), st.embed_rows.end(),
                                         [](const float* e) { return e == nullptr; });
  if (!lookup_folded) {
    if (auto ok = check(cuda_detail::token_lookup(dplan + L.ids, T, embeddings.as<const float>(),
                                                  c.vocab_size, hid, hh, s),
                        "embedding");
        !ok)
      return ok;
  }
  // Image tokens take the vision tower's rows (host memory), a run of
  // consecutive rows per copy.
  for (std::size_t t = 0; t < st.embed_rows.size();) {
    const float* e = st.embed_rows[t];
    if (e == nullptr) {
      ++t;
      continue;
    }
    std::size_t n = 1;
    while (t + n < st.embed_rows.size() && st.embed_rows[t + n] == e + n * hid)
      ++n;
    if (auto ok = check(
            cudaMemcpyAsync(hh + t * hid, e, n * hid * sizeof(float), cudaMemcpyHostToDevice, s),
            "image embeddings upload");
        !ok)
      return ok;
    t += n;
  }
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const auto io_for = [&](const kc::device_buffer& norm_weight) -> layer_io {
    if (fold)
      return {gemm_input{nullptr, nullptr, hh, norm_weight.as<const float>(), eps}, hh, true};
    return {staged(x.as<float>()), oo, false};
  };
  const float* pending = nullptr;
  for (const auto& l : layers) {
    if (!fold) {
      if (auto ok = add_norm(hh, pending, T, l.in_norm, x.as<float>()); !ok)
        return ok;
    }
    layer_io mixer_io = io_for(l.in_norm);
    if (lookup_folded && &l == &layers.front()) {
      cuda_detail::fold_token_lookup(mixer_io.in, dplan + L.ids, embeddings.as<const float>(),
                                     c.vocab_size, hh);
    }
    auto mixed = l.mixer == qwen3_5_mixer::delta_net ? delta_net(l, mixer_io, st, L)
                                                     : attention(l, mixer_io, st, L, table);
    if (!mixed)
      return mixed;
    if (!fold) {
      if (auto ok = add_norm(hh, oo, T, l.mlp_norm, x.as<float>()); !ok)
        return ok;
    }
    if (auto ok = mlp(l, io_for(l.mlp_norm), T); !ok)
      return ok;
    pending = fold ? nullptr : oo;
  }
  float* ll = last.as<float>();
  float* lg = logits.as<float>();
  gemm_input head_in = staged(ll);
  if (fold) {
    head_in = {nullptr, nullptr, hh, norm.as<const float>(), eps};  // h is whole: the head norms it
  } else if (st.decode && T == R) {
    if (auto ok = add_norm(hh, pending, T, norm, ll); !ok)
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
    if (auto ok = add_norm(ll, nullptr, R, norm, ll); !ok)
      return ok;
  }
  // Folded and greedy, the head's GEMV draws the token too (argmax_fold).
  if (fold && argmax && argmax_fold) {
    return check(cuda_detail::head_with_argmax(head_in, lm_head, lg, draws_to, argmax_state, s),
                 "rms_norm_linear_bf16 with the argmax");
  }
  if (auto ok = linear(head_in, R, lm_head, lg); !ok)
    return ok;
  if (!argmax)
    return {};
  return check(kc::argmax(matrix<const float>(lg, R, c.vocab_size), draws_to, s), "argmax");
}

result<void> qwen3_5_cuda::impl::sample(std::span<const row_sampling> rows, forward_slot& slot) {
  const std::size_t R = rows.size();
  // [temperature f32][top_p f32][top_k i32] then [seed u64][counter u64].
  const std::size_t words = (3 * R + 1) / 2 * 2;
  const std::size_t bytes = words * 4 + 2 * R * 8;
  if (auto ok = reserve_pinned(slot.settings, bytes); !ok)
    return ok;
  auto* host = slot.settings.as<std::byte>();
  std::memset(host, 0, bytes);
  auto* f = reinterpret_cast<float*>(host);
  auto* top_k = reinterpret_cast<std::int32_t*>(f + 2 * R);
  auto* u = reinterpret_cast<std::uint64_t*>(host + words * 4);
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
  if (auto ok =
          check(cudaMemcpyAsync(settings.buffer.data(), host, bytes, cudaMemcpyHostToDevice, s),
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
  p.out = draws_to;
  return check(kc::sample(p, s), "sample");
}

}  // namespace mstar::models

#endif
