// A decode step's small kernels at Nemotron-H's shapes, each of their forms
// timed in one run: mstar-gpu-bench's `--suite small`. The gated RMS norm
// (kernels/cuda/math.hpp, gated_rms_norm_variant's table: 1 the warp form,
// the default; 2 the loaded-warp form in blocks that cover every SM; 3-6 it
// in blocks of 1 / 2 / 4 / 8 warps; 0 the block form) on the Mamba-2 mixer's
// y and z (z the first columns of in_proj's output rows), bf16 out, as the
// bf16 model runs it; add_rms_norm (add_rms_norm_variant: 1 the default, 2
// the weight loaded before the chained wait, 3 / 4 a row over a cluster of
// two / four blocks) with a delta, bf16 out. Three operand temperatures:
//   hot           the same operands every call (L2-resident after the first)
//   cold          a rotating set of operand copies (weights too) whose
//                 touched bytes pass --cold-mib (default twice the L2); a
//                 copy comes back only after the whole set has passed
//                 (graphs are uploaded, not warmed up, for these cases)
//   cold_weights  the activations hot, the norm weights rotating: a decode
//                 step, whose activations the kernel before just wrote and
//                 whose layers each have their own weight
// Cases "<kernel>_<label>_b<rows>_<temperature>_f<form>"; bytes counted: the
// operands read and written once.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/gpu_bench_cases.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/tensor_view.hpp"

namespace mstar::bench::gpu {
namespace {

using kernels::matrix;
using kernels::vector;

const char* temperature_name(small_temperature t) {
  switch (t) {
    case small_temperature::hot:
      return "hot";
    case small_temperature::cold:
      return "cold";
    case small_temperature::cold_weights:
      return "cold_weights";
  }
  return "?";
}

// Copies of an operand laid out back to back, `stride` bytes apart (a
// multiple of 256, so every copy keeps the first's alignment).
struct rotation {
  cuda::device_buffer buffer;
  std::size_t stride = 0;
  std::size_t copies = 1;

  rotation(std::size_t bytes, std::size_t n, std::uint64_t seed)
      : stride((std::max<std::size_t>(bytes, 1) + 255) / 256 * 256), copies(n) {
    buffer = alloc(stride * copies);
    fill_random(buffer.data(), stride * copies, false, seed);
  }
  template <class T>
  [[nodiscard]] T* at(std::size_t i) const {
    return reinterpret_cast<T*>(static_cast<std::byte*>(buffer.data()) + (i % copies) * stride);
  }
};

// How many copies the activations and the weights get: one each hot; cold,
// enough that `touched` bytes a set times the copies pass `cold_bytes`;
// cold_weights, enough weight copies alone to pass it.
struct copy_counts {
  std::size_t activations = 1, weights = 1;
};

copy_counts counts_for(small_temperature t, double touched, double weight_bytes,
                       std::size_t cold_bytes) {
  const auto enough = [&](double per) {
    return std::max<std::size_t>(
        2, static_cast<std::size_t>(static_cast<double>(cold_bytes) / std::max(per, 1.0)) + 1);
  };
  switch (t) {
    case small_temperature::hot:
      return {};
    case small_temperature::cold: {
      const std::size_t n = enough(touched);
      return {n, n};
    }
    case small_temperature::cold_weights:
      return {1, enough(weight_bytes)};
  }
  return {};
}

comparison bench_gated(timer& t, copy_baseline& copy, const small_shape& m, int rows,
                       small_temperature temp, int form, std::size_t cold_bytes, int rounds) {
  const std::int64_t ch = m.mamba_channels;
  const std::int64_t proj = m.in_proj_width;
  const auto r = static_cast<std::size_t>(rows);
  const double weight_bytes = 4.0 * static_cast<double>(ch);
  const double touched = static_cast<double>(r) * static_cast<double>(ch) * (4 + 4 + 2);
  const copy_counts n = counts_for(temp, touched + weight_bytes, weight_bytes, cold_bytes);
  // The whole in_proj rows are allocated (z's row stride), only z read.
  const rotation y{r * static_cast<std::size_t>(ch) * 4, n.activations, 111};
  const rotation zx{r * static_cast<std::size_t>(proj) * 4, n.activations, 113};
  const rotation out{r * static_cast<std::size_t>(ch) * 2, n.activations, 115};
  const rotation w{static_cast<std::size_t>(ch) * 4, n.weights, 117};
  const call_counter next;
  const std::string name = "gated_norm_" + m.label + "_b" + std::to_string(rows) + "_" +
                           temperature_name(temp) + "_f" + std::to_string(form);
  auto c = measure(
      t, copy, name, "bytes_per_s", touched + weight_bytes,
      [&, next](cudaStream_t s) {
        const std::size_t i = next();
        kernels::gated_rms_norm_params p{matrix<const float>(y.at<const float>(i), rows, ch),
                                         {zx.at<const float>(i), {rows, ch}, {proj, 1}},
                                         vector<const float>(w.at<const float>(i), ch),
                                         {},
                                         ch / m.groups,
                                         1e-5F,
                                         matrix(out.at<std::uint16_t>(i), rows, ch)};
        return cuda::gated_rms_norm_variant(p, form, s);
      },
      rounds);
  c.extra["rows"] = rows;
  c.extra["channels"] = static_cast<double>(ch);
  c.extra["group"] = static_cast<double>(ch / m.groups);
  c.extra["form"] = form;
  c.extra["activation_copies"] = static_cast<double>(n.activations);
  c.extra["weight_copies"] = static_cast<double>(n.weights);
  return c;
}

comparison bench_add_norm(timer& t, copy_baseline& copy, const small_shape& m, int rows,
                          small_temperature temp, int form, std::size_t cold_bytes, int rounds) {
  const std::int64_t hid = m.hidden;
  const auto r = static_cast<std::size_t>(rows);
  const double weight_bytes = 4.0 * static_cast<double>(hid);
  // Residual read and written, delta read, bf16 out written.
  const double touched = static_cast<double>(r) * static_cast<double>(hid) * (4 + 4 + 4 + 2);
  const copy_counts n = counts_for(temp, touched + weight_bytes, weight_bytes, cold_bytes);
  const rotation res{r * static_cast<std::size_t>(hid) * 4, n.activations, 121};
  const rotation delta{r * static_cast<std::size_t>(hid) * 4, n.activations, 123};
  const rotation out{r * static_cast<std::size_t>(hid) * 2, n.activations, 125};
  const rotation w{static_cast<std::size_t>(hid) * 4, n.weights, 127};
  const call_counter next;
  const std::string name = "add_rms_norm_" + m.label + "_b" + std::to_string(rows) + "_" +
                           temperature_name(temp) + "_f" + std::to_string(form);
  auto c = measure(
      t, copy, name, "bytes_per_s", touched + weight_bytes,
      [&, next](cudaStream_t s) {
        const std::size_t i = next();
        kernels::add_rms_norm_params p{matrix(res.at<float>(i), rows, hid),
                                       matrix<const float>(delta.at<const float>(i), rows, hid),
                                       vector<const float>(w.at<const float>(i), hid),
                                       {},
                                       matrix(out.at<std::uint16_t>(i), rows, hid),
                                       1e-5F};
        return cuda::add_rms_norm_variant(p, form, s);
      },
      rounds);
  c.extra["rows"] = rows;
  c.extra["hidden"] = static_cast<double>(hid);
  c.extra["form"] = form;
  c.extra["activation_copies"] = static_cast<double>(n.activations);
  c.extra["weight_copies"] = static_cast<double>(n.weights);
  return c;
}

}  // namespace

std::vector<small_shape> nemotron_h_small_shapes() {
  // 0.56B: hidden 2,048, 64 Mamba heads of 64, 8 groups, state 128 (in_proj
  // rows 2 * 4,096 + 2 * 8 * 128 + 64); 8B: 4,096, 128 heads of 64.
  return {{"h2048", 2048, 4096, 8, 2 * 4096 + 2 * 8 * 128 + 64},
          {"h4096", 4096, 8192, 8, 2 * 8192 + 2 * 8 * 128 + 128}};
}

std::vector<comparison> bench_small(timer& t, copy_baseline& copy, const small_options& o,
                                    int rounds) {
  const std::size_t cold_bytes = cold_bytes_of(o.cold_mib);
  std::vector<comparison> out;
  for (const auto& m : nemotron_h_small_shapes()) {
    for (const int rows : o.rows) {
      for (const small_temperature temp : o.temperatures) {
        // A captured graph's warm-up launch would bring a cold case's
        // copies into L2 for the timed one: only uploaded, and each graph
        // (and eager batch) takes the copies after the last one's.
        t.warm_graphs = temp == small_temperature::hot;
        for (const int form : o.gated_forms)
          out.push_back(bench_gated(t, copy, m, rows, temp, form, cold_bytes, rounds));
        for (const int form : o.add_forms)
          out.push_back(bench_add_norm(t, copy, m, rows, temp, form, cold_bytes, rounds));
        t.warm_graphs = true;
      }
    }
  }
  return out;
}

}  // namespace mstar::bench::gpu
