#include "bench/model_gpu_roofline.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <utility>
#include <vector>

#include "bench/gpu_bench_cases.hpp"

namespace mstar::bench::gpu {

struct roofline_meter::devices {
  timer t;
  copy_baseline copy{std::size_t{1024} << 20U};  // mstar-gpu-bench's default size
};

roofline_meter::roofline_meter(models::cost_model model, int device, int rounds)
    : model_(std::move(model)), device_(device), rounds_(rounds) {}

roofline_meter::~roofline_meter() = default;

double roofline_meter::gemm_flops_per_s(std::int64_t tokens) {
  const auto found = gemm_rates_.find(tokens);
  if (found != gemm_rates_.end())
    return found->second;
  const gemm_case g{"widest", tokens, model_.widest_projection, model_.hidden};
  const double rate = time_gemm(dev_->t, g, rounds_).flops_per_s;
  gemm_rates_.emplace(tokens, rate);
  return rate;
}

nlohmann::json roofline_meter::figures(const std::string& label, const models::step_cost& cost,
                                       std::int64_t tokens, double seconds) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!dev_)
    dev_ = std::make_unique<devices>();
  auto& d = *dev_;
  const auto copy = std::cref(d.copy);
  const double probe = d.t.ms_per_call(copy, 1);
  const int reps = std::clamp(static_cast<int>(5.0 / std::max(probe, 1e-3)), 3, 200);
  std::vector<double> ms;
  for (int r = 0; r < rounds_; ++r)
    ms.push_back(d.t.ms_per_call(copy, reps));
  const double copy_bps = d.copy.moved() / (median(ms) * 1e-3);
  const double same_shape = gemm_flops_per_s(tokens);
  const double peak = gemm_flops_per_s(peak_tokens);
  const auto at_peak = models::place(cost, seconds, copy_bps, peak);
  const auto at_shape = models::place(cost, seconds, copy_bps, same_shape);
  nlohmann::json out{{"step", label},
                     {"step_ms", seconds * 1e3},
                     {"tokens", tokens},
                     {"bytes_per_step", cost.bytes()},
                     {"weight_bytes", cost.weight_bytes},
                     {"kv_bytes", cost.kv_bytes},
                     {"state_bytes", cost.state_bytes},
                     {"flops_per_step", cost.flops()},
                     {"gemm_flops", cost.gemm_flops},
                     {"attention_flops", cost.attention_flops},
                     {"scan_flops", cost.scan_flops},
                     {"achieved_GB_per_s", at_peak.bytes_per_s / 1e9},
                     {"copy_GB_per_s", copy_bps / 1e9},
                     {"bandwidth_fraction", at_peak.bandwidth_fraction},
                     {"achieved_TFLOP_per_s", at_peak.flops_per_s / 1e12},
                     {"gemm_TFLOP_per_s", same_shape / 1e12},
                     {"gemm_shape", {tokens, model_.widest_projection, model_.hidden}},
                     {"compute_fraction", at_shape.compute_fraction},
                     {"peak_TFLOP_per_s", peak / 1e12},
                     {"peak_tokens", peak_tokens},
                     {"compute_fraction_of_peak", at_peak.compute_fraction},
                     {"bound", at_peak.bound}};
  return out;
}

std::string roofline_meter::line(const nlohmann::json& f) {
  const auto num = [&f](const char* key) { return f.at(key).get<double>(); };
  return fmt::format(
      "  roofline {}: {:.3f} ms, {:.3f} GB/step (weights {:.3f}, KV {:.3f}, state {:.3f}) "
      "at {:.0f} GB/s = {:.3f} of the copy's {:.0f} GB/s; {:.4g} GFLOP/step at {:.2f} TFLOP/s "
      "= {:.3f} of cuBLAS at these {:.0f} tokens ({:.1f} TFLOP/s), {:.3f} of its peak at {} "
      "({:.1f}); bound: {}",
      f.at("step").get<std::string>(), num("step_ms"), num("bytes_per_step") / 1e9,
      num("weight_bytes") / 1e9, num("kv_bytes") / 1e9, num("state_bytes") / 1e9,
      num("achieved_GB_per_s"), num("bandwidth_fraction"), num("copy_GB_per_s"),
      num("flops_per_step") / 1e9, num("achieved_TFLOP_per_s"), num("compute_fraction"),
      num("tokens"), num("gemm_TFLOP_per_s"), num("compute_fraction_of_peak"), peak_tokens,
      num("peak_TFLOP_per_s"), f.at("bound").get<std::string>());
}

}  // namespace mstar::bench::gpu
