// nemotron_h_model: one step (admit, plan, kernels, commit) and the forward
// pass over a packed batch of rows.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "kernels/conv.hpp"
#include "kernels/math.hpp"
#include "kernels/ssd.hpp"
#include "models/cuda/nemotron_h_cuda.hpp"
#include "models/internal/mamba_params.hpp"
#include "models/nemotron_h.hpp"

namespace mstar::models {
namespace {

using kernels::matrix;
using kernels::vector;

// A kernel on well-formed shapes cannot fail; a failure is a bug here.
void must(const result<void>& r) {
  assert(r.has_value());
  (void)r;
}

void linear(const float* x, std::int64_t t, std::int64_t k, const std::vector<float>& w,
            std::int64_t n, float* out) {
  must(kernels::linear({matrix(x, t, k), matrix(w.data(), n, k), {}, matrix(out, t, n)}));
}

}  // namespace

result<step_outcome> nemotron_h_model::step(std::span<const step_row> rows,
                                            std::span<const row_sampling> sampling) {
  step_outcome out;
  auto kv = std::make_shared<resources::kv_step>();
  auto rec = std::make_shared<resources::recurrent_step>();
  resources::step_context ctx;
  for (const auto& r : rows) {
    if (r.tokens.empty()) {
      return make_error(errc::invalid_argument, fmt::format("row {} feeds no tokens", r.rid));
    }
    const resources::segment seg{r.rid, "main", static_cast<std::int64_t>(r.tokens.size())};
    kv->segments.push_back(seg);
    rec->segments.push_back(seg);
    ctx.request_ids.push_back(r.rid);
  }
  resources::step_bundle bundle;
  if (kv_) bundle["kv"] = kv;
  if (rec_) bundle["recurrent"] = rec;
  const auto admitted = runner_->admit(bundle, ctx);
  if (!admitted.ok()) {
    out.refused = admitted.outcome.reason;
    out.refused_by = admitted.failed_resource;
    return out;
  }
  if (auto planned = runner_->plan(bundle, ctx); !planned) {
    for (auto it = runner_->order().rbegin(); it != runner_->order().rend(); ++it) {
      (*it)->rollback_admit(*bundle.at((*it)->key()), ctx);
    }
    return planned.error();
  }
  const resources::kv_label_plan* kv_plan = nullptr;
  const resources::recurrent_addressing* rec_plan = nullptr;
  if (kv_) {
    kv_plan = &std::static_pointer_cast<const resources::kv_plan>(ctx.plan_results.at("kv"))
                   ->labels.at("main");
  }
  if (rec_) {
    auto a = std::static_pointer_cast<const resources::recurrent_plan>(
                 ctx.plan_results.at("recurrent"))
                 ->addressing("main");
    if (!a) return a.error();
    rec_plan = *a;
  }
  // The rows packed: token ids, cumulative counts, whether all feed one.
  std::vector<std::int32_t> ids, cu{0};
  bool decode = true;
  for (const auto& r : rows) {
    for (const auto t : r.tokens) ids.push_back(static_cast<std::int32_t>(t));
    cu.push_back(static_cast<std::int32_t>(ids.size()));
    decode = decode && r.tokens.size() == 1;
  }
  if (cuda_) {
    const nemotron_h_state state{kv_plan, rec_plan, kv_view_, conv_state_, ssm_state_};
    const bool draw = !sampling.empty();
    auto ran = cuda_->forward({ids, cu, decode}, state, draw ? nullptr : &out.logits,
                              draw ? &out.sampled : nullptr, sampling);
    if (!ran) {
      // The device failed mid-step: undo the admission so the pools stay whole.
      for (auto it = runner_->order().rbegin(); it != runner_->order().rend(); ++it) {
        (*it)->rollback_admit(*bundle.at((*it)->key()), ctx);
      }
      return ran.error();
    }
  } else {
    forward(ids, cu, decode, kv_plan, rec_plan, out.logits);
  }
  if (auto committed = runner_->commit(bundle, ctx); !committed) return committed.error();
  return out;
}

void nemotron_h_model::forward(std::span<const std::int32_t> ids,
                               std::span<const std::int32_t> cu, bool decode,
                               const resources::kv_label_plan* kv_plan,
                               const resources::recurrent_addressing* rec,
                               std::vector<float>& logits) {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size;
  const auto T = static_cast<std::int64_t>(ids.size());
  std::vector<float> h(static_cast<std::size_t>(T * hid)), x(h.size()), out(h.size());
  must(kernels::embedding(
      {vector<const std::int32_t>(ids.data(), T), matrix<const float>(embeddings_.data(), c.vocab_size, hid),
       matrix(h.data(), T, hid)}));
  const auto eps = static_cast<float>(c.layer_norm_epsilon);
  auto& inter = scratch_.inter;
  for (const auto& l : layers_) {
    must(kernels::rms_norm({matrix<const float>(h.data(), T, hid), vector<const float>(l.norm.data(), hid),
                            matrix(x.data(), T, hid), eps}));
    switch (l.kind) {
      case layer_kind::mamba2:
        mamba_layer(l, x.data(), out.data(), T, cu, decode, *rec);
        break;
      case layer_kind::attention:
        attention_layer(l, x.data(), out.data(), T, *kv_plan);
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
    auto hv = matrix(h.data(), T, hid);
    must(kernels::add({hv, matrix<const float>(out.data(), T, hid), hv}));
  }
  // Only each row's last token needs the head.
  const auto R = static_cast<std::int64_t>(cu.size()) - 1;
  std::vector<float> last(static_cast<std::size_t>(R * hid));
  for (std::int64_t r = 0; r < R; ++r) {
    std::copy_n(h.begin() + (cu[static_cast<std::size_t>(r + 1)] - 1) * hid, hid,
                last.begin() + r * hid);
  }
  auto lv = matrix(last.data(), R, hid);
  must(kernels::rms_norm({lv, vector<const float>(norm_f_.data(), hid), lv, eps}));
  logits.resize(static_cast<std::size_t>(R * c.vocab_size));
  linear(last.data(), R, hid, lm_head_, c.vocab_size, logits.data());
}

void nemotron_h_model::mamba_layer(const nemotron_h_layer& l, const float* x, float* out,
                                   std::int64_t tokens, std::span<const std::int32_t> cu,
                                   bool decode, const resources::recurrent_addressing& rec) {
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
  const std::span<const std::int32_t> slots{rec.slot_indices.data(), static_cast<std::size_t>(rows)};
  const std::span<const std::uint8_t> has{rec.has_state.data(), static_cast<std::size_t>(rows)};
  const auto cw =
      internal::conv_weights_of(c, l.conv_w.data(), l.conv_b.empty() ? nullptr : l.conv_b.data());
  float* conv_state = conv_state_[static_cast<std::size_t>(l.sub_index)];
  float* ssm_state = ssm_state_[static_cast<std::size_t>(l.sub_index)];
  if (decode) {
    kernels::causal_conv_update({cw, zxbcdt.data() + di, proj, xbc.data(), rows, conv_state, slots, has});
  } else {
    kernels::causal_conv_varlen({cw, zxbcdt.data() + di, proj, xbc.data(), cu, conv_state, slots, has});
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

void nemotron_h_model::attention_layer(const nemotron_h_layer& l, const float* x, float* out,
                                       std::int64_t tokens, const resources::kv_label_plan& plan) {
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
  const kernels::kv_page_table table{plan.qo_indptr, plan.kv_indptr, plan.kv_indices,
                                     plan.last_page_len, plan.decode_page, plan.decode_offset};
  kernels::append_kv({kv_view_, l.sub_index, table, k.data(), v.data()});
  kernels::paged_attention({kv_view_, l.sub_index, table, q.data(), o.data(),
                            static_cast<std::int32_t>(c.num_attention_heads), 0.0F});
  linear(o.data(), tokens, qd, l.o, c.hidden_size, out);
}

}  // namespace mstar::models
