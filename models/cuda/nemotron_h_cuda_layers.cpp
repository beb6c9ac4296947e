// nemotron_h_cuda's launches: weight upload helpers, the GEMM, norms, the
// Mamba-2 and attention mixers, sampling and one whole step (what a decode
// graph captures). Mirrors models/nemotron_h_forward.cpp step for step.
#include "models/cuda/nemotron_h_cuda.hpp"

#if MSTAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "core/dtype.hpp"
#include "kernels/math.hpp"
#include "models/cuda/internal/nemotron_h_cuda_impl.hpp"
#include "models/internal/mamba_params.hpp"

namespace mstar::models {
using kernels::matrix;
using kernels::vector;

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

result<void> nemotron_h_cuda::impl::linear(gemm_input in, std::int64_t t, const device_matrix& w,
                                           float* out_rows, bool accumulate) {
  const auto r =
      cuda_detail::launch_linear(blas, dtype, xb, in, t, w, out_rows, accumulate, stream.get());
  return check(r.err, r.what);
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
      {&q, std::max(T * qd, qd + 2 * kvd) * f},  // one token: the fused [q | k | v] row
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

result<void> nemotron_h_cuda::impl::mamba(const device_layer& l, const layer_io& io,
                                          std::int64_t tokens, const nemotron_h_batch& b,
                                          const nemotron_h_state& st, const std::int32_t* cu,
                                          const std::int32_t* slots_d, const std::uint8_t* has_d) {
  const auto& c = config;
  const cudaStream_t s = stream.get();
  const std::int64_t di = c.d_inner();
  const std::int64_t proj = c.in_proj_size();
  float* zx = zxbcdt.as<float>();
  float* xc = xbc.as<float>();
  float* yy = y.as<float>();
  const auto rows = static_cast<std::int32_t>(b.cu.size() - 1);
  const std::span<const std::int32_t> slots{slots_d, static_cast<std::size_t>(rows)};
  const std::span<const std::uint8_t> has{has_d, static_cast<std::size_t>(rows)};
  const std::span<const std::int32_t> cu_d{cu, b.cu.size()};
  const auto cw = internal::conv_weights_of(
      c, l.conv_w.as<const float>(), l.conv_b.size() == 0 ? nullptr : l.conv_b.as<const float>());
  float* conv_state = st.conv_state[static_cast<std::size_t>(l.sub_index)];
  float* ssm_state = st.ssm_state[static_cast<std::size_t>(l.sub_index)];
  // in_proj, then the conv over its xBC features (folded into one GEMV in
  // a batch-1 decode step where conv_fold is on).
  const auto projected =
      cuda_detail::in_proj_and_conv(blas, dtype, xb, conv_fold, b.decode, io.in, tokens, l.in_proj,
                                    zx, {cw, di, xc, conv_state, slots, has}, cu_d, s);
  if (auto ok = check(projected.err, projected.what); !ok)
    return ok;
  const auto sw = internal::ssd_weights_of(c, l.dt_bias.as<const float>(),
                                           l.a_log.as<const float>(), l.d.as<const float>());
  const auto in = internal::ssd_inputs_of(c, xc, zx);
  kc::ssd_workspace ws;
  if (!b.decode && chunked_ssd())
    ws = {ssd_scratch.buffer.data(), ssd_scratch.buffer.size(), tokens, 0};
  const auto eps = static_cast<float>(c.layer_norm_epsilon);
  // Early state reads only where the in_proj before releases the update
  // after its own wait (see ssd_early).
  kernels::ssd_update_params update{
      sw, in, yy, rows, ssm_state, slots, has, ssd_early && kc::gemv_releases_after_wait()};
  // The gated norm in the SSD update (ssd_norm_fold; one decode row, where
  // it was measured faster): out_proj reads the bf16 row it leaves, as
  // after the gated_rms_norm launch below.
  if (b.decode && rows == 1 && ssd_norm_fold) {
    const auto normed = staged_bf16(tokens, di);
    const kc::ssd_gated_norm_fold fold{
        zx, proj, l.gnorm.as<const float>(), eps, c.gated_norm_group_size(), normed.data};
    if (normed && kc::ssd_update_gated_norm_fits(update, fold)) {
      if (auto ok = check(kc::ssd_update_gated_norm(update, fold, s), "ssd_update_gated_norm"); !ok)
        return ok;
      return linear(staged(yy), tokens, l.out_proj, io.out, io.accumulate);
    }
  }
  const cudaError_t ssd =
      b.decode ? kc::ssd_update(update, s)
               : kc::ssd_scan_varlen({sw, in, yy, cu_d, ssm_state, slots, has}, ws, s);
  if (auto ok = check(ssd, "ssd"); !ok)
    return ok;
  // Folded (the step's GEMVs norm their own input): out_proj norms y
  // itself where that equals the two launches below bit for bit.
  if (io.in.norm_of != nullptr) {
    const gemm_input gated{.norm_of = yy,
                           .norm_weight = l.gnorm.as<const float>(),
                           .eps = eps,
                           .gate = zx,
                           .gate_stride = proj,
                           .group = c.gated_norm_group_size()};
    if (cuda_detail::gated_fold_fits(gated, tokens, l.out_proj, io.out, io.accumulate))
      return linear(gated, tokens, l.out_proj, io.out, io.accumulate);
  }
  // In place in f32; with bf16 weights straight into out_proj's input.
  const kernels::view<const float, 2> z{zx, {tokens, di}, {proj, 1}};
  auto yv = matrix(yy, tokens, di);
  kernels::gated_rms_norm_params g{
      yv, z, vector(l.gnorm.as<const float>(), di), {}, c.gated_norm_group_size(), eps};
  g.out_bf16 = staged_bf16(tokens, di);
  if (!g.out_bf16)
    g.out = yv;
  if (auto ok = check(kc::gated_rms_norm(g, s), "gated_rms_norm"); !ok)
    return ok;
  return linear(staged(yy), tokens, l.out_proj, io.out, io.accumulate);
}

result<void> nemotron_h_cuda::impl::attention(const device_layer& l, const layer_io& io,
                                              std::int64_t tokens,
                                              const kernels::kv_page_table& table,
                                              const kernels::kv_arena_view& kv) {
  const cudaStream_t s = stream.get();
  const gemm_input xs = io.in;
  // One token: q, k and v in one product, a row [q | k | v] in `q` (sized
  // for it); more: three products into their own rows.
  float* kp = k.as<float>();
  float* vp = v.as<float>();
  // Folded, one decode row: the product stores k and v in their page too
  // (append_fold), so no append_kv launch follows it.
  const bool append_folded = tokens == 1 && fused_qkv && append_fold && xs.norm_of != nullptr &&
                             xs.embed_ids == nullptr && table.is_decode() && table.num_rows() == 1;
  if (append_folded) {
    if (auto ok = check(cuda_detail::qkv_with_append(xs, l.qkv, q.as<float>(),
                                                     {kv, l.sub_index, table, l.q.rows}, s),
                        "rms_norm_linear_bf16 with the KV append");
        !ok)
      return ok;
  } else if (tokens == 1 && fused_qkv) {
    if (auto ok = linear(xs, tokens, l.qkv, q.as<float>()); !ok)
      return ok;
    kp = q.as<float>() + l.q.rows;
    vp = kp + l.k.rows;
  } else {
    if (auto ok = linear(xs, tokens, l.q, q.as<float>()); !ok)
      return ok;
    if (auto ok = linear(xs, tokens, l.k, kp); !ok)
      return ok;
    if (auto ok = linear(xs, tokens, l.v, vp); !ok)
      return ok;
  }
  if (!append_folded) {
    if (auto ok = check(kc::append_kv({kv, l.sub_index, table, kp, vp}, s), "append_kv"); !ok)
      return ok;
  }
  // Small decode batches over long contexts split each row's positions
  // over several blocks (the workspace is sized per step, before any launch).
  const kernels::paged_attention_params ap{kv,
                                           l.sub_index,
                                           table,
                                           q.as<float>(),
                                           o.as<float>(),
                                           static_cast<std::int32_t>(config.num_attention_heads)};
  if (auto ok = check(kc::paged_attention(ap, split.buffer.data(), split.buffer.size(), s),
                      "paged_attention");
      !ok)
    return ok;
  // The attention output is f32: with bf16 weights linear rounds it first,
  // or, folded, the GEMV rounds it into its own input.
  const gemm_input attended{.f32 = o.as<float>(),
                            .fold_f32 = io.in.norm_of != nullptr && f32_folds.bf16};
  return linear(attended, tokens, l.o, io.out, io.accumulate);
}

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
  // The residual stream: each layer's output (`out`) is added to h by the
  // next layer's norm (`pending`), which writes that layer's GEMM input.
  // Folded (one row, bf16, one rank): each layer's first GEMV norms h
  // itself and its last adds onto h, so no norm kernel runs between them;
  // the first layer's GEMVs look the token up too (embed_fold).
  const bool fold = fused_norms && T == 1 && R == 1 && b.decode &&
                    dtype == mstar::dtype::bfloat16 && tp.comm == nullptr && hid % 8 == 0 &&
                    hid <= kc::rms_norm_linear_max_k;
  const bool lookup_folded = fold && embed_fold && !layers.empty();
  if (!lookup_folded) {
    if (auto ok = check(cuda_detail::token_lookup(dplan + L.ids, T, embeddings.as<const float>(),
                                                  c.vocab_size, hid, hh, s),
                        "embedding");
        !ok)
      return ok;
  }
  const auto eps = static_cast<float>(c.layer_norm_epsilon);
  const float* pending = nullptr;
  for (const auto& l : layers) {
    layer_io io{staged(xx), oo, false};
    if (fold) {
      io = {gemm_input{nullptr, nullptr, hh, l.norm.as<const float>(), eps}, hh, true};
      if (lookup_folded && &l == &layers.front()) {
        cuda_detail::fold_token_lookup(io.in, dplan + L.ids, embeddings.as<const float>(),
                                       c.vocab_size, hh);
      }
    } else if (auto ok = add_norm(hh, pending, T, l.norm, xx); !ok) {
      return ok;
    }
    result<void> mixed;
    switch (l.kind) {
      case layer_kind::mamba2:
        mixed = mamba(l, io, T, b, st, dplan + L.cu, dplan + L.slots, has_d);
        break;
      case layer_kind::attention:
        mixed = attention(l, io, T, table, st.kv);
        break;
      case layer_kind::mlp: {
        float* in = inter.as<float>();
        const auto fn =
            c.mlp_hidden_act == "silu" ? kernels::activation::silu : kernels::activation::relu2;
        // Folded, with the activation in up's epilogue: up writes the bf16
        // row down reads (a plain GEMV), no f32 row between them.
        if (fold && mlp_epilogue && io.in.embed_ids == nullptr) {
          auto* act = xb.as<std::uint16_t>();
          mixed = check(cuda_detail::activated_folded_linear(io.in, T, l.up, fn, act, s),
                        "rms_norm_linear_bf16 with the activation");
          if (mixed)
            mixed = linear(gemm_input{.bf16 = act}, T, l.down, io.out, io.accumulate);
          break;
        }
        mixed = linear(io.in, T, l.up, in);
        if (!mixed)
          break;
        // Folded: down's GEMV activates its input row itself, where that
        // equals the two launches below bit for bit.
        if (fold && f32_folds.act) {
          const gemm_input activated{.f32 = in, .fold_f32 = true, .act = fn};
          if (cuda_detail::f32_fold_fits(activated, T, l.down, io.out, io.accumulate)) {
            mixed = linear(activated, T, l.down, io.out, io.accumulate);
            break;
          }
        }
        // In place in f32; with bf16 weights straight into down's input.
        auto iv = matrix(in, T, c.intermediate_size);
        kernels::activation_params a{iv, {}, staged_bf16(T, c.intermediate_size), fn};
        if (!a.out_bf16)
          a.out = iv;
        mixed = check(kc::activate(a, s), "mlp activation");
        if (!mixed)
          break;
        mixed = linear(staged(in), T, l.down, io.out, io.accumulate);
        break;
      }
      case layer_kind::moe:
        break;  // refused at load
    }
    if (!mixed)
      return mixed;
    if (fold)
      continue;
    // Row-parallel projections leave each rank a partial sum.
    if (auto ok = all_reduce(oo, static_cast<std::size_t>(T * hid)); !ok)
      return ok;
    pending = oo;
  }
  // Only each row's last token needs the head. A decode step's rows are one
  // token each (row r's last token is token r): the last add and the final
  // norm run over h as it is. Otherwise add, gather those rows (an
  // embedding lookup into h), then norm them.
  float* ll = last.as<float>();
  float* lg = logits.as<float>();
  if (fold) {
    // h is whole: the head's GEMV norms it (and, greedy, draws the token
    // too: argmax_fold).
    const gemm_input head_in{nullptr, nullptr, hh, norm_f.as<const float>(), eps};
    if (argmax && argmax_fold) {
      return check(cuda_detail::head_with_argmax(head_in, lm_head, lg, draws_to, argmax_state, s),
                   "rms_norm_linear_bf16 with the argmax");
    }
    if (auto ok = linear(head_in, R, lm_head, lg); !ok)
      return ok;
  } else if (b.decode && T == R) {
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
  if (!fold) {
    if (auto ok = lm_head_rows(ll, R, lg); !ok)
      return ok;
  }
  if (!argmax)
    return {};
  return check(kc::argmax(matrix<const float>(lg, R, c.vocab_size), draws_to, s), "argmax");
}

result<void> nemotron_h_cuda::impl::sample(std::span<const row_sampling> rows, forward_slot& slot) {
  const std::size_t R = rows.size();
  // [temperature f32][top_p f32][top_k i32] then [seed u64][counter u64],
  // each R long; the u64 arrays start 8-byte aligned.
  const std::size_t words = (3 * R + 1) / 2 * 2;
  const std::size_t bytes = words * 4 + 2 * R * 8;
  // Pinned and the slot's own: the upload is still queued when launch
  // returns, and the next forward fills the other slot's.
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
