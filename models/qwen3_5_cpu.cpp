// The Qwen3.5 text forward on the CPU (float32): embedding, the decoder
// layers over a packed batch of rows, the final norm and the LM head on each
// row's last token.
#include "models/qwen3_5_cpu.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/conv.hpp"
#include "kernels/delta_rule.hpp"
#include "kernels/math.hpp"
#include "models/internal/cpu_ops.hpp"

namespace mstar::models {
namespace {

using kernels::matrix;
using kernels::vector;

using internal::linear;
using internal::must;

void grow(std::vector<float>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n)
    v.resize(static_cast<std::size_t>(n));
}

}  // namespace

void qwen3_5_cpu::load(const qwen3_5_config& config, const qwen3_5_host_weights& weights) {
  config_ = config;
  weights_ = weights;
  const auto rot = config.rotary_dim();
  inv_freq_.resize(static_cast<std::size_t>(rot / 2));
  for (std::int64_t i = 0; i < rot / 2; ++i) {
    // As transformers: in float32, 1 / theta^(2i / rot).
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rot);
    inv_freq_[static_cast<std::size_t>(i)] =
        1.0F / std::pow(static_cast<float>(config.rope_theta), exponent);
  }
}

void qwen3_5_cpu::forward(const qwen3_5_step& step, std::vector<float>& logits) {
  const auto& c = config_;
  const auto& w = weights_;
  const std::int64_t hid = c.hidden_size;
  const auto T = static_cast<std::int64_t>(step.ids.size());
  grow(h_, T * hid);
  grow(x_, T * hid);
  grow(out_, T * hid);
  must(kernels::embedding({vector<const std::int32_t>(step.ids.data(), T),
                           matrix<const float>(w.embeddings->data(), c.vocab_size, hid),
                           matrix(h_.data(), T, hid)}));
  for (std::size_t t = 0; t < step.embed_rows.size(); ++t) {
    if (const float* e = step.embed_rows[t])
      std::copy_n(e, hid, h_.begin() + static_cast<std::int64_t>(t) * hid);
  }
  const auto eps = static_cast<float>(c.rms_norm_eps);
  auto hv = matrix(h_.data(), T, hid);
  for (const auto& l : w.layers) {
    must(kernels::rms_norm({matrix<const float>(h_.data(), T, hid),
                            vector<const float>(l.in_norm.data(), hid), matrix(x_.data(), T, hid),
                            eps}));
    if (l.mixer == qwen3_5_mixer::delta_net)
      delta_net(l, x_.data(), out_.data(), T, step);
    else
      attention(l, x_.data(), out_.data(), T, step);
    must(kernels::add({hv, matrix<const float>(out_.data(), T, hid), hv}));
    must(kernels::rms_norm({matrix<const float>(h_.data(), T, hid),
                            vector<const float>(l.mlp_norm.data(), hid), matrix(x_.data(), T, hid),
                            eps}));
    mlp(l, x_.data(), out_.data(), T);
    must(kernels::add({hv, matrix<const float>(out_.data(), T, hid), hv}));
  }
  // Only each row's last token needs the head.
  const auto R = static_cast<std::int64_t>(step.cu.size()) - 1;
  grow(last_, R * hid);
  for (std::int64_t r = 0; r < R; ++r) {
    std::copy_n(h_.begin() + (step.cu[static_cast<std::size_t>(r + 1)] - 1) * hid, hid,
                last_.begin() + r * hid);
  }
  auto lv = matrix(last_.data(), R, hid);
  must(kernels::rms_norm({lv, vector<const float>(w.norm->data(), hid), lv, eps}));
  logits.resize(static_cast<std::size_t>(R * c.vocab_size));
  linear(last_.data(), R, hid, *w.lm_head, c.vocab_size, logits.data());
}

void qwen3_5_cpu::delta_net(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens,
                            const qwen3_5_step& step) {
  const auto& c = config_;
  const auto geo = c.delta_net();
  const std::int64_t cd = geo.conv_dim(), vd = c.value_dim(), HV = c.linear_num_value_heads;
  const std::int64_t proj = cd + vd + 2 * HV;
  grow(proj_, tokens * proj);
  linear(x, tokens, c.hidden_size, l.in_proj, proj, proj_.data());
  // Columns: qkv [0, cd), z [cd, cd + vd), b [cd + vd, + HV), a [cd + vd + HV, + HV).
  grow(conv_, tokens * cd);
  const auto& rec = *step.rec;
  const auto rows = static_cast<std::int32_t>(step.cu.size() - 1);
  const std::span<const std::int32_t> slots{rec.slot_indices.data(),
                                            static_cast<std::size_t>(rows)};
  const std::span<const std::uint8_t> has{rec.has_state.data(), static_cast<std::size_t>(rows)};
  const kernels::conv_weights cw{l.conv_w.data(), nullptr, static_cast<std::int32_t>(cd),
                                 static_cast<std::int32_t>(c.linear_conv_kernel_dim), true};
  float* conv_state = step.conv_state[static_cast<std::size_t>(l.sub_index)];
  if (step.decode) {
    kernels::causal_conv_update(
        {cw, proj_.data(), proj, conv_.data(), rows, conv_state, slots, has});
  } else {
    kernels::causal_conv_varlen(
        {cw, proj_.data(), proj, conv_.data(), step.cu, conv_state, slots, has});
  }
  grow(rule_, tokens * vd);
  const kernels::gated_delta_weights gw{l.a_log.data(),
                                        l.dt_bias.data(),
                                        static_cast<std::int32_t>(geo.num_k_heads),
                                        static_cast<std::int32_t>(geo.num_v_heads),
                                        static_cast<std::int32_t>(geo.head_k_dim),
                                        static_cast<std::int32_t>(geo.head_v_dim),
                                        0.0F};
  const float* ab = proj_.data() + cd + vd;
  kernels::gated_delta_rule_varlen({gw,
                                    {conv_.data(), cd, ab + HV, ab, proj},
                                    rule_.data(),
                                    step.cu,
                                    step.delta_state[static_cast<std::size_t>(l.sub_index)],
                                    slots,
                                    has});
  kernels::head_gated_rms_norm({rule_.data(), proj_.data() + cd, proj, l.gnorm.data(), rule_.data(),
                                nullptr, tokens, static_cast<std::int32_t>(HV),
                                static_cast<std::int32_t>(geo.head_v_dim),
                                static_cast<float>(c.rms_norm_eps)});
  linear(rule_.data(), tokens, vd, l.out_proj, c.hidden_size, out);
}

void qwen3_5_cpu::attention(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens,
                            const qwen3_5_step& step) {
  const auto& c = config_;
  const std::int64_t D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const std::int64_t qd = Hq * D, kvd = Hkv * D;
  grow(gate_, tokens * 2 * qd);  // the q projection: per head D query then D gate channels
  grow(q_, tokens * qd);
  grow(o_, tokens * qd);
  grow(k_, tokens * kvd);
  grow(v_, tokens * kvd);
  linear(x, tokens, c.hidden_size, l.q, 2 * qd, gate_.data());
  linear(x, tokens, c.hidden_size, l.k, kvd, k_.data());
  linear(x, tokens, c.hidden_size, l.v, kvd, v_.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < Hq; ++h) {
      std::copy_n(gate_.begin() + (t * Hq + h) * 2 * D, D, q_.begin() + (t * Hq + h) * D);
    }
  }
  const auto eps = static_cast<float>(c.rms_norm_eps);
  auto qv = matrix(q_.data(), tokens * Hq, D);
  auto kv = matrix(k_.data(), tokens * Hkv, D);
  must(kernels::rms_norm({qv, vector<const float>(l.q_norm.data(), D), qv, eps}));
  must(kernels::rms_norm({kv, vector<const float>(l.k_norm.data(), D), kv, eps}));
  const auto half = static_cast<std::int64_t>(inv_freq_.size());
  const kernels::view<const std::int32_t, 2> pos{step.positions.data(), {3, tokens}, {tokens, 1}};
  const kernels::view<const float, 1> freq{inv_freq_.data(), {half}, {1}};
  const std::int64_t sections[3] = {c.mrope_section[0], c.mrope_section[1], c.mrope_section[2]};
  for (auto* buf : {&q_, &k_}) {
    const std::int64_t heads = buf == &q_ ? Hq : Hkv;
    kernels::mrope_params rp{{buf->data(), {tokens, heads, D}, {heads * D, D, 1}}, pos, freq, {}};
    std::copy_n(sections, 3, rp.sections);
    must(kernels::mrope(rp));
  }
  const auto& plan = *step.kv_plan;
  const kernels::kv_page_table table{plan.qo_indptr,     plan.kv_indptr,   plan.kv_indices,
                                     plan.last_page_len, plan.decode_page, plan.decode_offset};
  kernels::append_kv({step.kv, l.sub_index, table, k_.data(), v_.data()});
  kernels::paged_attention(
      {step.kv, l.sub_index, table, q_.data(), o_.data(), static_cast<std::int32_t>(Hq), 0.0F});
  // The output gate: o * sigmoid(gate), per head the second D channels of the q projection.
  kernels::output_gate({o_.data(), gate_.data() + D, Hq * 2 * D, 2 * D, o_.data(), nullptr, tokens,
                        static_cast<std::int32_t>(Hq), static_cast<std::int32_t>(D)});
  linear(o_.data(), tokens, qd, l.o, c.hidden_size, out);
}

void qwen3_5_cpu::mlp(const qwen3_5_layer& l, const float* x, float* out, std::int64_t tokens) {
  const auto& c = config_;
  const std::int64_t inter = c.intermediate_size;
  grow(gate_, tokens * inter);
  grow(up_, tokens * inter);
  linear(x, tokens, c.hidden_size, l.gate, inter, gate_.data());
  linear(x, tokens, c.hidden_size, l.up, inter, up_.data());
  auto gv = matrix(gate_.data(), tokens, inter);
  must(kernels::silu({gv, gv}));
  must(kernels::mul({gv, matrix<const float>(up_.data(), tokens, inter), gv}));
  linear(gate_.data(), tokens, inter, l.down, c.hidden_size, out);
}

}  // namespace mstar::models
