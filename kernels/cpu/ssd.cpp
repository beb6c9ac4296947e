#include "kernels/ssd.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>

namespace mstar::kernels {
namespace {

struct dims {
  std::size_t h, p, n, g, heads_per_group, x_stride, dt_stride, bc_stride, slot_elems;
};

dims dims_of(const ssd_weights& w, const ssd_inputs& in) {
  assert(w.n_groups > 0 && w.num_heads % w.n_groups == 0 && "groups must divide heads");
  dims d{};
  d.h = static_cast<std::size_t>(w.num_heads);
  d.p = static_cast<std::size_t>(w.head_dim);
  d.n = static_cast<std::size_t>(w.state_size);
  d.g = static_cast<std::size_t>(w.n_groups);
  d.heads_per_group = d.h / d.g;
  d.x_stride = in.x_stride != 0 ? static_cast<std::size_t>(in.x_stride) : d.h * d.p;
  d.dt_stride = in.dt_stride != 0 ? static_cast<std::size_t>(in.dt_stride) : d.h;
  d.bc_stride = in.bc_stride != 0 ? static_cast<std::size_t>(in.bc_stride) : d.g * d.n;
  d.slot_elems = d.h * d.p * d.n;
  return d;
}

// Advances state `s` ([H][P][N]) by token t of `in`, writing y[t] ([H][P]).
void step(const ssd_weights& w, const ssd_inputs& in, const dims& d, std::size_t t, float* s,
          float* y) {
  const float* x = in.x + t * d.x_stride;
  const float* b = in.B + t * d.bc_stride;
  const float* c = in.C + t * d.bc_stride;
  for (std::size_t h = 0; h < d.h; ++h) {
    const float dt = ssd_dt(in.dt[t * d.dt_stride + h] + w.dt_bias[h], w.dt_min, w.dt_max);
    const float decay = std::exp(dt * -std::exp(w.A_log[h]));
    const std::size_t g = h / d.heads_per_group;
    const float* bg = b + g * d.n;
    const float* cg = c + g * d.n;
    const float skip = w.D != nullptr ? w.D[h] : 0.0f;
    for (std::size_t p = 0; p < d.p; ++p) {
      const float xv = x[h * d.p + p];
      const float dtx = dt * xv;
      float* sp = s + (h * d.p + p) * d.n;
      float acc = 0.0f;
      for (std::size_t n = 0; n < d.n; ++n) {
        sp[n] = decay * sp[n] + dtx * bg[n];
        acc += sp[n] * cg[n];
      }
      y[h * d.p + p] = acc + skip * xv;
    }
  }
}

}  // namespace

float ssd_dt(float raw_plus_bias, float dt_min, float dt_max) noexcept {
  const float sp = raw_plus_bias > 20.0f ? raw_plus_bias : std::log1p(std::exp(raw_plus_bias));
  return std::min(std::max(sp, dt_min), dt_max);
}

void ssd_scan_varlen(const ssd_scan_varlen_params& p) {
  const dims d = dims_of(p.w, p.in);
  const std::size_t out_elems = d.h * d.p;
  const std::size_t rows = p.cu_seqlens.empty() ? 0 : p.cu_seqlens.size() - 1;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto begin = static_cast<std::size_t>(p.cu_seqlens[r]);
    const auto end = static_cast<std::size_t>(p.cu_seqlens[r + 1]);
    const std::int32_t slot = p.slot_indices[r];
    if (slot < 0) {
      std::fill(p.y + begin * out_elems, p.y + end * out_elems, 0.0f);
      continue;
    }
    if (end == begin)
      continue;
    float* s = p.state + static_cast<std::size_t>(slot) * d.slot_elems;
    if (p.has_state[r] == 0)
      std::fill(s, s + d.slot_elems, 0.0f);
    for (std::size_t t = begin; t < end; ++t)
      step(p.w, p.in, d, t, s, p.y + t * out_elems);
  }
}

void ssd_update(const ssd_update_params& p) {
  const dims d = dims_of(p.w, p.in);
  const std::size_t out_elems = d.h * d.p;
  for (std::size_t b = 0; b < static_cast<std::size_t>(p.batch); ++b) {
    const std::int32_t slot = p.slot_indices[b];
    if (slot < 0) {
      std::fill(p.y + b * out_elems, p.y + (b + 1) * out_elems, 0.0f);
      continue;
    }
    float* s = p.state + static_cast<std::size_t>(slot) * d.slot_elems;
    if (!p.has_state.empty() && p.has_state[b] == 0)
      std::fill(s, s + d.slot_elems, 0.0f);
    step(p.w, p.in, d, b, s, p.y + b * out_elems);
  }
}

}  // namespace mstar::kernels
