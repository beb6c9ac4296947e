#pragma once
// The roofline beside mstar-bench-model-gpu's steps (issue 17): what a step
// must move and compute (models/step_cost.hpp) against ceilings measured in
// the same process on the same GPU: the device-to-device copy's bandwidth
// (gpu_bench_support.hpp's copy_baseline, read + written bytes) and cuBLAS
// bf16 GEMMs (bench/gpu_bench_gemm.cpp) of the model's widest projection,
// [tokens, hidden] x [hidden, widest], at the step's token count and at
// `peak_tokens` (the tensor-core peak).
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/step_cost.hpp"

namespace mstar::bench::gpu {

/// Measures the ceilings on CUDA device `device` (made current before each
/// measurement) and places steps under them. Not thread-safe; use between
/// engine runs (the model idle) so the two do not share the GPU.
class roofline_meter {
 public:
  /// Tokens of the GEMM taken as the tensor-core peak: 8 prompts of 2,048.
  static constexpr std::int64_t peak_tokens = 16384;

  roofline_meter(models::cost_model model, int device, int rounds);
  ~roofline_meter();
  roofline_meter(const roofline_meter&) = delete;
  roofline_meter& operator=(const roofline_meter&) = delete;

  /// The figures of a step of `cost` over `tokens` tokens that took
  /// `seconds`: its bytes and FLOPs, the copy's bandwidth and the GEMMs'
  /// rates (measured now: the copy, the step's GEMM shape once per token
  /// count, the peak once), achieved rates and fractions, and the bound
  /// (models::place against the copy and the peak). `label` is "decode" or
  /// "prefill", for `line`.
  nlohmann::json figures(const std::string& label, const models::step_cost& cost,
                         std::int64_t tokens, double seconds);

  /// The model whose steps are placed.
  [[nodiscard]] const models::cost_model& model() const noexcept { return model_; }

  /// One human line of `figures`' output.
  [[nodiscard]] static std::string line(const nlohmann::json& f);

 private:
  struct devices;  // the timer and copy buffers, made on first use
  double gemm_flops_per_s(std::int64_t tokens);

  models::cost_model model_;
  int device_;
  int rounds_;
  std::unique_ptr<devices> dev_;
  std::map<std::int64_t, double> gemm_rates_;  // by token count
};

}  // namespace mstar::bench::gpu
