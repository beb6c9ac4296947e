// The Nemotron-H forward on the CPU (float32): embedding, the layer walk
// over a packed batch of rows, the final norm and the LM head on each row's
// last token.
#include "models/nemotron_h_cpu.hpp"

#include <algorithm>
#include <cassert>
#include <fmt/format.h>

#include "kernels/conv.hpp"
#include "kernels/math.hpp"
#include "kernels/sampling.hpp"
#include "kernels/ssd.hpp"
#include "models/internal/cpu_ops.hpp"
#include "models/internal/mamba_params.hpp"

namespace mstar::models {
namespace {

using kernels::matrix;
using kernels::vector;

using internal::linear;
using internal::must;

}  // namespace

result<void> nemotron_h_cpu::load(const nemotron_h_config& config,
                                  const nemotron_h_host_weights& weights, std::int64_t kv_pages) {
  (void)kv_pages;
  config_ = config;
  weights_ = weights;
  return {};
}

result<void> nemotron_h_cpu::set_tensor_parallel(const nemotron_h_tensor_parallel& tp) {
  if (tp.comm == nullptr || tp.vocab_rows < 0 || tp.vocab_chunk < tp.vocab_rows) {
    return make_error(errc::invalid_argument,
                      "tensor parallel: no communicator, or a bad LM head part");
  }
  tp_ = tp;
  return {};
}

result<void> nemotron_h_cpu::lm_head(const float* last, std::int64_t rows_n,
                                     std::vector<float>& rows) {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size, V = c.vocab_size;
  rows.resize(static_cast<std::size_t>(rows_n * V));
  if (tp_.comm == nullptr) {
    linear(last, rows_n, hid, *weights_.lm_head, V, rows.data());
    return {};
  }
  // This rank's vocabulary part, padded to the common chunk, then every
  // rank's part gathered rank-major: [size][R][chunk] -> [R][vocab].
  const std::int64_t chunk = tp_.vocab_chunk, mine = tp_.vocab_rows;
  auto& part = scratch_.part;
  part.assign(static_cast<std::size_t>(rows_n * chunk), 0.0F);
  if (mine > 0) {
    auto& tmp = scratch_.gathered;
    tmp.resize(static_cast<std::size_t>(rows_n * mine));
    linear(last, rows_n, hid, *weights_.lm_head, mine, tmp.data());
    for (std::int64_t r = 0; r < rows_n; ++r)
      std::copy_n(tmp.begin() + r * mine, mine, part.begin() + r * chunk);
  }
  const auto n = static_cast<std::int64_t>(tp_.comm->size());
  auto& all = scratch_.gathered;
  all.resize(static_cast<std::size_t>(n * rows_n * chunk));
  if (auto ok = tp_.comm->all_gather(part, all); !ok)
    return ok;
  for (std::int64_t q = 0; q < n; ++q) {
    const std::int64_t begin = q * chunk,
                       count = std::max<std::int64_t>(0, std::min(chunk, V - begin));
    for (std::int64_t r = 0; r < rows_n; ++r) {
      std::copy_n(all.begin() + (q * rows_n + r) * chunk, count, rows.begin() + r * V + begin);
    }
  }
  return {};
}

result<void> nemotron_h_cpu::forward(const nemotron_h_batch& batch, const nemotron_h_state& state,
                                     std::vector<float>* logits, std::vector<std::int32_t>* sampled,
                                     std::span<const row_sampling> sampling) {
  const auto& c = config_;
  const auto& w = weights_;
  const std::int64_t hid = c.hidden_size;
  const auto ids = batch.ids;
  const auto cu = batch.cu;
  const auto T = static_cast<std::int64_t>(ids.size());
  auto& h = scratch_.h;
  auto& x = scratch_.x;
  auto& out = scratch_.out;
  h.resize(static_cast<std::size_t>(T * hid));
  x.resize(h.size());
  out.resize(h.size());
  must(kernels::embedding({vector<const std::int32_t>(ids.data(), T),
                           matrix<const float>(w.embeddings->data(), c.vocab_size, hid),
                           matrix(h.data(), T, hid)}));
  const auto eps = static_cast<float>(c.layer_norm_epsilon);
  auto& inter = scratch_.inter;
  for (const auto& l : w.layers) {
    must(kernels::rms_norm({matrix<const float>(h.data(), T, hid),
                            vector<const float>(l.norm.data(), hid), matrix(x.data(), T, hid),
                            eps}));
    switch (l.kind) {
      case layer_kind::mamba2:
        mamba_layer(l, x.data(), out.data(), T, batch, state);
        break;
      case layer_kind::attention:
        attention_layer(l, x.data(), out.data(), T, state);
        break;
      case layer_kind::mlp: {
        inter.resize(static_cast<std::size_t>(T * c.intermediate_size));
        linear(x.data(), T, hid, l.up, c.intermediate_size, inter.data());
        auto iv = matrix(inter.data(), T, c.intermediate_size);
        must(c.mlp_hidden_act == "silu" ? kernels::silu({iv, iv}) : kernels::relu2({iv, iv}));
        linear(inter.data(), T, c.intermediate_size, l.down, hid, out.data());
        break;
      }
      case layer_kind::moe:
        break;  // refused at load
    }
    // Row-parallel projections leave each rank a partial sum of the output.
    if (tp_.comm != nullptr && l.kind != layer_kind::moe) {
      if (auto ok = tp_.comm->all_reduce_sum({out.data(), static_cast<std::size_t>(T * hid)}); !ok)
        return ok;
    }
    auto hv = matrix(h.data(), T, hid);
    must(kernels::add({hv, matrix<const float>(out.data(), T, hid), hv}));
  }
  // Only each row's last token needs the head.
  const auto R = static_cast<std::int64_t>(cu.size()) - 1;
  auto& last = scratch_.last;
  last.resize(static_cast<std::size_t>(R * hid));
  for (std::int64_t r = 0; r < R; ++r) {
    std::copy_n(h.begin() + (cu[static_cast<std::size_t>(r + 1)] - 1) * hid, hid,
                last.begin() + r * hid);
  }
  auto lv = matrix(last.data(), R, hid);
  must(kernels::rms_norm({lv, vector<const float>(w.norm_f->data(), hid), lv, eps}));
  auto& rows = logits != nullptr ? *logits : scratch_.logits;
  if (auto ok = lm_head(last.data(), R, rows); !ok)
    return ok;
  if (sampled != nullptr) {
    sampled->assign(static_cast<std::size_t>(R), -1);
    for (std::int64_t r = 0; r < R && static_cast<std::size_t>(r) < sampling.size(); ++r) {
      const auto& s = sampling[static_cast<std::size_t>(r)];
      auto tok = kernels::sample(
          {kernels::contiguous<const float, 1>(rows.data() + r * c.vocab_size, {c.vocab_size}),
           s.temperature, s.top_k, s.top_p, s.seed, s.counter});
      if (tok)
        (*sampled)[static_cast<std::size_t>(r)] = *tok;
    }
  }
  return {};
}

void nemotron_h_cpu::mamba_layer(const nemotron_h_layer& l, const float* x, float* out,
                                 std::int64_t tokens, const nemotron_h_batch& batch,
                                 const nemotron_h_state& state) {
  const auto cu = batch.cu;
  const bool decode = batch.decode;
  const auto& rec = *state.rec;
  const auto& c = config_;
  const std::int64_t di = c.d_inner(), cd = c.conv_dim();
  const std::int64_t proj = c.in_proj_size();
  auto& zxbcdt = scratch_.zxbcdt;
  zxbcdt.resize(static_cast<std::size_t>(tokens * proj));
  linear(x, tokens, c.hidden_size, l.in_proj, proj, zxbcdt.data());
  // Columns: z [0, di), xBC [di, di + cd), dt [di + cd, proj).
  auto& xbc = scratch_.xbc;
  xbc.resize(static_cast<std::size_t>(tokens * cd));
  const auto rows = static_cast<std::int32_t>(cu.size() - 1);
  const std::span<const std::int32_t> slots{rec.slot_indices.data(),
                                            static_cast<std::size_t>(rows)};
  const std::span<const std::uint8_t> has{rec.has_state.data(), static_cast<std::size_t>(rows)};
  const auto cw =
      internal::conv_weights_of(c, l.conv_w.data(), l.conv_b.empty() ? nullptr : l.conv_b.data());
  float* conv_state = state.conv_state[static_cast<std::size_t>(l.sub_index)];
  float* ssm_state = state.ssm_state[static_cast<std::size_t>(l.sub_index)];
  if (decode) {
    kernels::causal_conv_update(
        {cw, zxbcdt.data() + di, proj, xbc.data(), rows, conv_state, slots, has});
  } else {
    kernels::causal_conv_varlen(
        {cw, zxbcdt.data() + di, proj, xbc.data(), cu, conv_state, slots, has});
  }
  const auto sw = internal::ssd_weights_of(c, l.dt_bias.data(), l.a_log.data(), l.d.data());
  const auto in = internal::ssd_inputs_of(c, xbc.data(), zxbcdt.data());
  auto& y = scratch_.y;
  y.resize(static_cast<std::size_t>(tokens * di));
  if (decode) {
    kernels::ssd_update({sw, in, y.data(), rows, ssm_state, slots, has});
  } else {
    kernels::ssd_scan_varlen({sw, in, y.data(), cu, ssm_state, slots, has});
  }
  // Gated norm: rms over groups of (y * silu(z)), times its weight.
  kernels::view<const float, 2> z{zxbcdt.data(), {tokens, di}, {proj, 1}};
  auto yv = matrix(y.data(), tokens, di);
  must(kernels::gated_rms_norm({yv, z, vector<const float>(l.gnorm.data(), di), yv,
                                c.gated_norm_group_size(),
                                static_cast<float>(c.layer_norm_epsilon)}));
  linear(y.data(), tokens, di, l.out_proj, c.hidden_size, out);
}

void nemotron_h_cpu::attention_layer(const nemotron_h_layer& l, const float* x, float* out,
                                     std::int64_t tokens, const nemotron_h_state& state) {
  const auto& plan = *state.kv_plan;
  const auto& kv_view = state.kv;
  const auto& c = config_;
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  auto& q = scratch_.q;
  auto& k = scratch_.k;
  auto& v = scratch_.v;
  auto& o = scratch_.o;
  q.resize(static_cast<std::size_t>(tokens * qd));
  o.resize(q.size());
  k.resize(static_cast<std::size_t>(tokens * kvd));
  v.resize(k.size());
  linear(x, tokens, c.hidden_size, l.q, qd, q.data());
  linear(x, tokens, c.hidden_size, l.k, kvd, k.data());
  linear(x, tokens, c.hidden_size, l.v, kvd, v.data());
  const kernels::kv_page_table table{plan.qo_indptr,     plan.kv_indptr,   plan.kv_indices,
                                     plan.last_page_len, plan.decode_page, plan.decode_offset};
  kernels::append_kv({kv_view, l.sub_index, table, k.data(), v.data()});
  kernels::paged_attention({kv_view, l.sub_index, table, q.data(), o.data(),
                            static_cast<std::int32_t>(c.num_attention_heads), 0.0F});
  linear(o.data(), tokens, qd, l.o, c.hidden_size, out);
}

}  // namespace mstar::models
