// cuBLAS bf16 GEMMs on the models' projection shapes (bench/gpu_bench_cases.hpp):
// the tensor-core reference of issue 17's tables, in mstar-gpu-bench's
// `--suite gemm` and beside each step of mstar-bench-model-gpu.
#include <cublas_v2.h>
#include <string>
#include <vector>

#include "bench/gpu_bench_cases.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::bench::gpu {
namespace {

using mstar::kernels::matrix;

// Exits with cuBLAS's own words when a call fails (a benchmark has no recovery).
void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "gpu bench: %s: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}

std::size_t elems(std::int64_t a, std::int64_t b) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

// The operands of one case: random bf16 activations [m, k] and weight
// [n, k] (never zeros: the tensor cores' power, and so the clock, depend on
// the data), a bf16 output [m, n], and a handle on the timer's stream.
struct gemm_operands {
  gemm_case g;
  cuda::device_buffer x, w, out;
  cuda::blas_handle blas;
  bool ours = false;  // through cuda::linear_bf16 (its GEMV kernel up to 8 rows)

  gemm_operands(const gemm_case& shape, cudaStream_t stream, bool through_ours = false)
      : g(shape),
        x(alloc(elems(shape.m, shape.k) * 2)),
        w(alloc(elems(shape.n, shape.k) * 2)),
        out(alloc(elems(shape.m, shape.n) * 2)),
        blas(must(cuda::blas_handle::make(), "cuBLAS handle")),
        ours(through_ours) {
    fill_random(x.data(), elems(shape.m, shape.k) * 2, true, 71);
    fill_random(w.data(), elems(shape.n, shape.k) * 2, true, 73);
    check_blas(cublasSetStream(blas.get(), stream), "cublasSetStream");
  }

  // out = x w^T, row-major: in cuBLAS's column-major terms out^T [n, m] = w [n, k] x^T.
  cudaError_t operator()(cudaStream_t s) const {
    if (ours) {
      cuda::linear_bf16_params p;
      p.x = matrix(x.as<const std::uint16_t>(), g.m, g.k);
      p.weight = matrix(w.as<const std::uint16_t>(), g.n, g.k);
      p.out_bf16 = matrix(out.as<std::uint16_t>(), g.m, g.n);
      return cuda::linear_bf16(blas, p, s);
    }
    const float one = 1.0F, zero = 0.0F;
    const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    check_blas(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w.data(),
                            CUDA_R_16BF, k, x.data(), CUDA_R_16BF, k, &zero, out.data(),
                            CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
    return cudaGetLastError();
  }

  [[nodiscard]] double flops() const {
    return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  }
  // Operands read once, output written once: the least a GEMM moves.
  [[nodiscard]] double bytes() const {
    return 2.0 * static_cast<double>(elems(g.m, g.k) + elems(g.n, g.k) + elems(g.m, g.n));
  }
};

}  // namespace

gemm_timing time_gemm(timer& t, const gemm_case& g, int rounds) {
  const gemm_operands op{g, t.stream.get()};
  const auto call = std::cref(op);
  const double probe = t.ms_per_call(call, 1);  // also the warm-up (cuBLAS's heuristics)
  const int reps = std::clamp(static_cast<int>(5.0 / std::max(probe, 1e-3)), 3, 200);
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r)
    ms.push_back(t.ms_per_call(call, reps));
  const double m = median(ms);
  return {m * 1e3, op.flops() / (m * 1e-3)};
}

comparison bench_gemm(timer& t, copy_baseline& copy, const gemm_case& g, int rounds, bool ours) {
  const gemm_operands op{g, t.stream.get(), ours};
  auto c =
      measure(t, copy, (ours ? "linear_bf16_" : "gemm_") + g.label + "_m" + std::to_string(g.m),
              "bytes_per_s", op.bytes(), std::cref(op), rounds);
  c.extra["m"] = static_cast<double>(g.m);
  c.extra["n"] = static_cast<double>(g.n);
  c.extra["k"] = static_cast<double>(g.k);
  c.extra["TFLOP_per_s"] = op.flops() / (c.extra["us_per_call"] * 1e-6) / 1e12;
  return c;
}

std::vector<gemm_case> nemotron_h_projections() {
  // bench/make_checkpoint.py's nemotron_h-0.56b (hidden 2048: Mamba-2 64 heads
  // of 64, state 128, 8 groups; MLP 8192; vocabulary 32,000) and nemotron_h-8b
  // (hidden 4096: 128 heads; MLP 21504; vocabulary 131,072). in_proj is
  // d_inner + conv_dim + heads wide: 4096 + 6144 + 64, 8192 + 10240 + 128.
  return {{"h2048_in_proj", 0, 10304, 2048},  {"h2048_out_proj", 0, 2048, 4096},
          {"h2048_mlp_up", 0, 8192, 2048},    {"h2048_mlp_down", 0, 2048, 8192},
          {"h2048_lm_head", 0, 32000, 2048},  {"h4096_in_proj", 0, 18560, 4096},
          {"h4096_out_proj", 0, 4096, 8192},  {"h4096_mlp_up", 0, 21504, 4096},
          {"h4096_mlp_down", 0, 4096, 21504}, {"h4096_lm_head", 0, 131072, 4096}};
}

}  // namespace mstar::bench::gpu
