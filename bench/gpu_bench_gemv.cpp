// The one-row GEMV (kernels/cuda/gemv.cu) on Nemotron-H's projections at a
// batch-1 decode step, in each launch shape of its table (gemv_shape.hpp):
// mstar-gpu-bench's `--suite gemv`. Each projection runs plain
// (linear_bf16 of a bf16 row) and in the fold the model runs it with: the
// RMS-norm form before in_proj, the MLP's up projection and the LM head,
// the gated norm's before out_proj (groups of K / 8: n_groups 8), relu2's
// before the MLP's down projection; out_proj and the down projection add
// onto the f32 residual, as the model's do.
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gpu_bench_cases.hpp"
#include "kernels/cuda/gemv_chain.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::bench::gpu {
namespace {

using mstar::kernels::contiguous;
using mstar::kernels::matrix;

enum class gemv_form { plain, rms, gated, act };

const char* form_name(gemv_form f) {
  switch (f) {
    case gemv_form::plain:
      return "plain";
    case gemv_form::rms:
      return "rms";
    case gemv_form::gated:
      return "gated";
    case gemv_form::act:
      return "relu2";
  }
  return "?";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The fold the model runs before projection `label`.
gemv_form fold_of(const std::string& label) {
  if (ends_with(label, "out_proj"))
    return gemv_form::gated;
  if (ends_with(label, "mlp_down"))
    return gemv_form::act;
  return gemv_form::rms;
}

// One projection's operands: the [n, k] bf16 weight (`copies` of it, one a
// call in turn: cold, each call's weights are out of L2 as in a model's
// step), the input row as bf16 (plain) and f32 (the folds: x, the gate, the
// norm weight), an f32 output.
struct gemv_operands {
  gemm_case g;
  std::size_t copies;
  cuda::device_buffer w, x16, x, gate, norm_w, out;
  cuda::blas_handle blas = must(cuda::blas_handle::make(), "cuBLAS handle");  // MSTAR_GEMV=0
  call_counter next;

  gemv_operands(const gemm_case& shape, std::size_t weight_copies)
      : g(shape),
        copies(weight_copies),
        w(alloc(copies * static_cast<std::size_t>(shape.n * shape.k) * 2)),
        x16(alloc(static_cast<std::size_t>(shape.k) * 2)),
        x(alloc(static_cast<std::size_t>(shape.k) * 4)),
        gate(alloc(static_cast<std::size_t>(shape.k) * 4)),
        norm_w(alloc(static_cast<std::size_t>(shape.k) * 4)),
        out(alloc(static_cast<std::size_t>(shape.n) * 4)) {
    fill_random(w.data(), copies * static_cast<std::size_t>(g.n * g.k) * 2, true, 91);
    fill_random(x16.data(), static_cast<std::size_t>(g.k) * 2, true, 93);
    fill_random(x.data(), static_cast<std::size_t>(g.k) * 4, false, 95);
    fill_random(gate.data(), static_cast<std::size_t>(g.k) * 4, false, 97);
    fill_random(norm_w.data(), static_cast<std::size_t>(g.k) * 4, false, 99);
    fill_random(out.data(), static_cast<std::size_t>(g.n) * 4, false, 101);
  }

  // The product's half of every form's params, at launch shape `variant`.
  template <class P>
  void fill(P& p, int variant, bool accumulate) const {
    const auto copy = static_cast<std::int64_t>(next() % copies);
    p.weight = matrix(w.as<const std::uint16_t>() + copy * g.n * g.k, g.n, g.k);
    p.out_f32 = matrix(out.as<float>(), 1, g.n);
    p.accumulate = accumulate;
    p.gemv_variant = variant;
    p.weight_static = true;
  }

  // `f` of the params of `form` at launch shape `variant`.
  template <class F>
  auto with_params(gemv_form form, int variant, bool accumulate, F&& f) const {
    const auto row = [&](const cuda::device_buffer& b) {
      return matrix(b.as<const float>(), 1, g.k);
    };
    const auto norm = contiguous(norm_w.as<const float>(), std::array{g.k});
    switch (form) {
      case gemv_form::rms: {
        cuda::rms_norm_linear_bf16_params p;
        fill(p, variant, accumulate);
        p.x = row(x);
        p.norm_weight = norm;
        return f(p);
      }
      case gemv_form::gated: {
        cuda::gated_rms_norm_linear_bf16_params p;
        fill(p, variant, accumulate);
        p.x = row(x);
        p.gate = row(gate);
        p.norm_weight = norm;
        p.group_size = g.k / 8;
        return f(p);
      }
      case gemv_form::act: {
        cuda::activation_linear_bf16_params p;
        fill(p, variant, accumulate);
        p.x = row(x);
        p.fn = kernels::activation::relu2;
        return f(p);
      }
      case gemv_form::plain:
        break;
    }
    cuda::linear_bf16_params p;
    p.x = matrix(x16.as<const std::uint16_t>(), 1, g.k);
    fill(p, variant, accumulate);
    return f(p);
  }

  [[nodiscard]] cudaError_t run(gemv_form form, int variant, bool accumulate,
                                cudaStream_t s) const {
    return with_params(form, variant, accumulate, [&](const auto& p) { return launch(p, s); });
  }

  // Whether the form takes this shape (the plain product always does: cuBLAS
  // past the GEMV's limits).
  [[nodiscard]] bool fits(gemv_form form, int variant) const {
    return with_params(form, variant, false, [](const auto& p) { return takes(p); });
  }

  cudaError_t launch(const cuda::linear_bf16_params& p, cudaStream_t s) const {
    return cuda::linear_bf16(blas, p, s);
  }
  static cudaError_t launch(const cuda::rms_norm_linear_bf16_params& p, cudaStream_t s) {
    return cuda::rms_norm_linear_bf16(p, s);
  }
  static cudaError_t launch(const cuda::gated_rms_norm_linear_bf16_params& p, cudaStream_t s) {
    return cuda::gated_rms_norm_linear_bf16(p, s);
  }
  static cudaError_t launch(const cuda::activation_linear_bf16_params& p, cudaStream_t s) {
    return cuda::activation_linear_bf16(p, s);
  }
  static bool takes(const cuda::linear_bf16_params& /*p*/) { return true; }
  static bool takes(const cuda::rms_norm_linear_bf16_params& p) {
    return cuda::rms_norm_linear_bf16_fits(p);
  }
  static bool takes(const cuda::gated_rms_norm_linear_bf16_params& p) {
    return cuda::gated_rms_norm_linear_bf16_fits(p);
  }
  static bool takes(const cuda::activation_linear_bf16_params& p) {
    return cuda::activation_linear_bf16_fits(p);
  }

  // The weight and input row read once, the output written (and read when
  // accumulating).
  [[nodiscard]] double bytes(gemv_form form, bool accumulate) const {
    const double k = static_cast<double>(g.k);
    const double in = form == gemv_form::plain ? 2 * k : form == gemv_form::gated ? 12 * k : 8 * k;
    return 2.0 * static_cast<double>(g.n) * k + in +
           (accumulate ? 8.0 : 4.0) * static_cast<double>(g.n);
  }
};

}  // namespace

std::vector<comparison> bench_gemv_shapes(timer& t, copy_baseline& copy,
                                          const std::vector<int>& variants, int rounds,
                                          std::size_t cold_bytes) {
  std::vector<comparison> out;
  for (auto g : nemotron_h_projections()) {
    g.m = 1;
    const double weight_bytes = 2.0 * static_cast<double>(g.n * g.k);
    // Cold: enough copies that a rotation passes cold_bytes (at least two).
    const std::size_t copies =
        cold_bytes == 0
            ? 1
            : std::max<std::size_t>(
                  2, static_cast<std::size_t>(static_cast<double>(cold_bytes) / weight_bytes) + 1);
    const gemv_operands op{g, copies};
    const gemv_form fold = fold_of(g.label);
    const bool accumulate = fold != gemv_form::rms;  // out_proj, mlp_down: onto the residual
    for (const gemv_form form : {gemv_form::plain, fold}) {
      for (const int v : variants) {
        const std::string name = std::string{"gemv_"} + form_name(form) + "_" + g.label + "_v" +
                                 (v < 0 ? std::string{"default"} : std::to_string(v)) +
                                 (cold_bytes != 0 ? "_cold" : "");
        if (!op.fits(form, v)) {  // as the model does, which then launches the parts
          std::fprintf(stderr, "gpu bench: %s: the form does not take this shape; skipped\n",
                       name.c_str());
          continue;
        }
        std::fprintf(stderr, "gpu bench: %s (%zu weight copies)\n", name.c_str(), copies);
        auto c = measure(
            t, copy, name, "bytes_per_s", op.bytes(form, accumulate),
            [&](cudaStream_t s) { return op.run(form, v, accumulate, s); }, rounds);
        const int entry = cuda::gemv_variant_for(v, g.n, g.k);
        const auto& shape = cuda::gemv_shapes[entry];
        c.extra["n"] = static_cast<double>(g.n);
        c.extra["k"] = static_cast<double>(g.k);
        c.extra["gemv_variant"] = v;
        c.extra["gemv_entry"] = entry;
        c.extra["split"] = shape.split;
        c.extra["blocks"] = static_cast<double>(shape.blocks(g.n));
        c.extra["threads"] = shape.threads();
        c.extra["weight_copies"] = static_cast<double>(copies);
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

std::vector<comparison> bench_gemv_chain(timer& t, copy_baseline& copy, int layers, int rounds) {
  // (n, k): out_proj, MLP up, down, in_proj of the 0.56B (hidden 2,048, d_inner 4,096,
  // intermediate 8,192, in_proj 2 x 4,096 + 2 x 8 x 128 + 64 rows).
  constexpr std::array<std::array<std::int32_t, 2>, 4> layer{
      {{2048, 4096}, {8192, 2048}, {2048, 8192}, {10304, 2048}}};
  std::vector<cuda::device_buffer> weights, outs;
  const auto x0 = alloc(static_cast<std::size_t>(cuda::gemv_chain_max_k) * 4);
  fill_random(x0.data(), static_cast<std::size_t>(cuda::gemv_chain_max_k) * 4, false, 103);
  std::vector<cuda::gemv_chain_link> links;
  double bytes = 0.0;
  for (int l = 0; l < layers; ++l) {
    for (const auto& [n, k] : layer) {
      const auto wbytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(k) * 2;
      weights.push_back(alloc(wbytes));
      // Values in [-1, 1): a link's outputs grow ~15-30 times (sqrt(K) / 3),
      // 16 links at most stay far inside f32's range.
      fill_random(weights.back().data(), wbytes, true, 105 + links.size());
      outs.push_back(alloc(static_cast<std::size_t>(n) * 4));
      const float* in = links.empty() ? x0.as<const float>() : links.back().out;
      links.push_back(
          {weights.back().as<const std::uint16_t>(), in, outs.back().as<float>(), n, k});
      bytes += static_cast<double>(wbytes) + 4.0 * k + 4.0 * n;
    }
  }
  auto counters = alloc(cuda::gemv_chain_counter_bytes);
  check(cudaMemset(counters.data(), 0, cuda::gemv_chain_counter_bytes), "counters");
  const auto separate = [&](int variant) {
    return [&links, variant](cudaStream_t s) {
      for (const auto& l : links) {
        cuda::activation_linear_bf16_params p;
        p.x = matrix(l.in, 1, l.k);
        p.weight = matrix(l.weight, l.n, l.k);
        p.out_f32 = matrix(l.out, 1, l.n);
        p.gemv_variant = variant;
        p.weight_static = true;
        if (const cudaError_t e = cuda::activation_linear_bf16(p, s); e != cudaSuccess)
          return e;
      }
      return cudaSuccess;
    };
  };
  const std::string base = "gemv_chain_" + std::to_string(layers) + "x4";
  std::vector<comparison> out;
  std::fprintf(stderr, "gpu bench: %s: %zu links, %.1f MB a call\n", base.c_str(), links.size(),
               bytes / 1e6);
  out.push_back(measure(t, copy, base + "_gemvs", "bytes_per_s", bytes, separate(-1), rounds));
  out.push_back(measure(t, copy, base + "_gemvs_v5", "bytes_per_s", bytes, separate(5), rounds));
  for (const auto rows : {cuda::gemv_chain_rows::fixed, cuda::gemv_chain_rows::grabbed}) {
    const bool grab = rows == cuda::gemv_chain_rows::grabbed;
    out.push_back(measure(
        t, copy, base + (grab ? "_persistent" : "_persistent_fixed"), "bytes_per_s", bytes,
        [&](cudaStream_t s) {
          return cuda::gemv_chain(links, counters.as<std::uint32_t>(), s, rows);
        },
        rounds));
  }
  for (auto& c : out) {
    c.extra["links"] = static_cast<double>(links.size());
    c.extra["bytes_per_call"] = bytes;
  }
  out.back().extra["gemvs_us_over_persistent_us"] =
      out.front().extra["us_per_call"] / out.back().extra["us_per_call"];
  return out;
}

}  // namespace mstar::bench::gpu
