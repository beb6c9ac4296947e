// The one-row GEMV (kernels/cuda/gemv.cu) on Nemotron-H's projections at a
// batch-1 decode step, in each launch shape of its table (gemv_shape.hpp):
// mstar-gpu-bench's `--suite gemv`. Each projection runs plain
// (linear_bf16 of a bf16 row) and in the fold the model runs it with: the
// RMS-norm form before in_proj, the MLP's up projection and the LM head,
// the gated norm's before out_proj (groups of K / 8: n_groups 8), relu2's
// before the MLP's down projection; out_proj and the down projection add
// onto the f32 residual, as the model's do.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gpu_bench_cases.hpp"
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

}  // namespace mstar::bench::gpu
