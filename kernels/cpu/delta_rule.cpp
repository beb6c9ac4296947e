// The gated delta rule and its gated norm on the CPU (float32 storage,
// double accumulation of the dot products): the reference the CUDA kernels
// are compared with.
#include "kernels/delta_rule.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.hpp"

namespace mstar::kernels {
namespace {

// torch's softplus (beta 1, threshold 20): linear above the threshold.
double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

// x / sqrt(sum x^2 + 1e-6), as transformers' and FLA's l2norm.
void l2_normalise(const float* x, std::int64_t n, double scale, std::vector<double>& out) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    sum += double{x[i]} * double{x[i]};
  const double inv = scale / std::sqrt(sum + 1e-6);
  out.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = double{x[i]} * inv;
}

}  // namespace

void gated_delta_rule_varlen(const gated_delta_rule_params& p) {
  const auto& w = p.w;
  const std::int64_t HK = w.num_k_heads, HV = w.num_v_heads, K = w.head_k_dim, V = w.head_v_dim;
  const std::int64_t group = HV / HK;
  const std::int64_t stride = p.in.qkv_stride != 0 ? p.in.qkv_stride : 2 * HK * K + HV * V;
  const std::int64_t ab = p.in.ab_stride != 0 ? p.in.ab_stride : HV;
  const double scale = w.scale != 0.0F ? double{w.scale} : 1.0 / std::sqrt(double(K));
  const std::int64_t slot_elems = HV * V * K;
  std::vector<double> q, k, s(static_cast<std::size_t>(V * K)), kv(static_cast<std::size_t>(V));
  const auto rows = static_cast<std::int64_t>(p.cu_seqlens.size()) - 1;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t t0 = p.cu_seqlens[static_cast<std::size_t>(r)];
    const std::int64_t t1 = p.cu_seqlens[static_cast<std::size_t>(r + 1)];
    const std::int32_t slot = p.slot_indices[static_cast<std::size_t>(r)];
    if (slot < 0) {
      std::fill(p.out + t0 * HV * V, p.out + t1 * HV * V, 0.0F);
      continue;
    }
    if (t1 == t0)
      continue;
    const bool carried = p.has_state[static_cast<std::size_t>(r)] != 0;
    float* slot_state = p.state + slot * slot_elems;
    for (std::int64_t h = 0; h < HV; ++h) {
      float* sh = slot_state + h * V * K;
      for (std::int64_t i = 0; i < V * K; ++i)
        s[static_cast<std::size_t>(i)] = carried ? double{sh[i]} : 0.0;
      const std::int64_t kh = h / group;
      const double a_coef = -std::exp(double{w.a_log[h]});
      for (std::int64_t t = t0; t < t1; ++t) {
        const float* row = p.in.qkv + t * stride;
        l2_normalise(row + kh * K, K, scale, q);
        l2_normalise(row + HK * K + kh * K, K, 1.0, k);
        const float* v = row + 2 * HK * K + h * V;
        const double decay =
            std::exp(a_coef * softplus(double{p.in.a[t * ab + h]} + double{w.dt_bias[h]}));
        const double beta = 1.0 / (1.0 + std::exp(-double{p.in.b[t * ab + h]}));
        for (std::int64_t vi = 0; vi < V; ++vi) {
          double* sv = s.data() + vi * K;
          double dot = 0.0;
          for (std::int64_t ki = 0; ki < K; ++ki) {
            sv[ki] *= decay;
            dot += sv[ki] * k[static_cast<std::size_t>(ki)];
          }
          const double u = beta * (double{v[vi]} - dot);
          double o = 0.0;
          for (std::int64_t ki = 0; ki < K; ++ki) {
            sv[ki] += u * k[static_cast<std::size_t>(ki)];
            o += sv[ki] * q[static_cast<std::size_t>(ki)];
          }
          p.out[(t * HV + h) * V + vi] = static_cast<float>(o);
        }
      }
      for (std::int64_t i = 0; i < V * K; ++i)
        sh[i] = static_cast<float>(s[static_cast<std::size_t>(i)]);
    }
  }
}

void head_gated_rms_norm(const head_gated_rms_norm_params& p) {
  const std::int64_t H = p.heads, D = p.head_dim;
  const std::int64_t gs = p.gate_stride != 0 ? p.gate_stride : H * D;
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    for (std::int64_t h = 0; h < H; ++h) {
      const float* x = p.x + (t * H + h) * D;
      const float* z = p.gate + t * gs + h * D;
      float* out = p.out != nullptr ? p.out + (t * H + h) * D : nullptr;
      double sum = 0.0;
      for (std::int64_t d = 0; d < D; ++d)
        sum += double{x[d]} * double{x[d]};
      const auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(D) + p.eps));
      for (std::int64_t d = 0; d < D; ++d) {
        const float gate = z[d] / (1.0F + std::exp(-z[d]));
        const float o = x[d] * inv * p.weight[d] * gate;
        if (p.out_bf16 != nullptr)
          p.out_bf16[(t * H + h) * D + d] = float_to_bf16_bits(o);
        if (out != nullptr)
          out[d] = o;
      }
    }
  }
}

void output_gate(const output_gate_params& p) {
  const std::int64_t H = p.heads, D = p.head_dim;
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    for (std::int64_t h = 0; h < H; ++h) {
      const float* g = p.gate + t * p.gate_token_stride + h * p.gate_head_stride;
      const std::int64_t at = (t * H + h) * D;
      for (std::int64_t d = 0; d < D; ++d) {
        const float o = p.x[at + d] * (1.0F / (1.0F + std::exp(-g[d])));
        if (p.out_bf16 != nullptr)
          p.out_bf16[at + d] = float_to_bf16_bits(o);
        if (p.out != nullptr)
          p.out[at + d] = o;
      }
    }
  }
}

}  // namespace mstar::kernels
