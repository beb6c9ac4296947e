// Mamba-2 cases of mstar-gpu-bench (bench/gpu_bench_cases.hpp): the SSD
// decode update and scan, and the causal conv, on f32 inputs packed per
// token as the model's conv output is ([x | B | C], then dt).
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu_bench_cases.hpp"

namespace mstar::bench::gpu {
namespace {

// `tokens` tokens of [x (H*P) | B (G*N) | C (G*N) | dt (H)] f32, random, and
// the layer's dt_bias, A_log and D; `in` addresses them as the kernels do.
struct ssd_batch {
  std::int64_t row, xw, gn;
  cuda::device_buffer inputs, params;
  mstar::kernels::ssd_weights w;
  mstar::kernels::ssd_inputs in;

  ssd_batch(const mamba_shape& m, std::size_t tokens)
      : row(std::int64_t{m.heads} * m.head_dim + 2 * m.groups * m.state_size + m.heads),
        xw(std::int64_t{m.heads} * m.head_dim),
        gn(std::int64_t{m.groups} * m.state_size),
        inputs(alloc(tokens * static_cast<std::size_t>(row) * sizeof(float))),
        params(alloc(3 * static_cast<std::size_t>(m.heads) * sizeof(float))) {
    fill_random(inputs.data(), tokens * static_cast<std::size_t>(row) * sizeof(float), false, 23);
    fill_random(params.data(), 3 * static_cast<std::size_t>(m.heads) * sizeof(float), false, 29);
    const float* x = inputs.as<const float>();
    const float* p = params.as<const float>();
    w = {p,        p + m.heads, p + 2 * m.heads, m.heads, m.head_dim, m.state_size,
         m.groups, 0.0F,        100.0F};
    in = {x, x + xw + 2 * gn, x + xw, x + xw + gn, row, row, row};
  }
};

std::vector<std::int32_t> shuffled_slots(int n, std::uint64_t seed) {
  std::vector<std::int32_t> slots(static_cast<std::size_t>(n));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64{seed});
  return slots;
}

std::vector<std::int32_t> cu_seqlens(int rows, int tokens) {
  std::vector<std::int32_t> cu(1, 0);
  for (int r = 0; r < rows; ++r)
    cu.push_back(cu.back() + tokens);
  return cu;
}

template <class T>
std::span<const T> device_span(const cuda::device_buffer& b, std::size_t n) {
  return {b.as<const T>(), n};
}

}  // namespace

namespace {

// A decode step of `batch` rows on shuffled slots of a pool of `batch`, the
// state random (every row resumes).
struct update_step {
  std::size_t state_elems;
  cuda::device_buffer state;
  ssd_batch in;
  std::vector<std::int32_t> slots;
  cuda::device_buffer d_slots, y;
  mstar::kernels::ssd_update_params p;

  update_step(const mamba_shape& m, int batch)
      : state_elems(std::size_t{1} * batch * m.heads * m.head_dim * m.state_size),
        state(alloc(state_elems * sizeof(float))),
        in(m, static_cast<std::size_t>(batch)),
        slots(shuffled_slots(batch, 31)),
        d_slots(upload(slots)),
        y(alloc(static_cast<std::size_t>(batch) * in.xw * sizeof(float))),
        p{in.w,
          in.in,
          y.as<float>(),
          batch,
          state.as<float>(),
          device_span<std::int32_t>(d_slots, slots.size()),
          {}} {
    fill_random(state.data(), state_elems * sizeof(float), false, 19);
  }

  // The state read and written plus the step's inputs and outputs.
  [[nodiscard]] double bytes() const {
    return 2.0 * static_cast<double>(state_elems) * sizeof(float) +
           static_cast<double>(p.batch) * static_cast<double>(in.row + in.xw) * sizeof(float);
  }

  void describe(comparison& c) const {
    c.extra["state_MiB"] = static_cast<double>(state_elems) * sizeof(float) / (1 << 20);
    c.extra["rows"] = p.batch;
  }
};

}  // namespace

comparison bench_ssd_update(timer& t, copy_baseline& copy, const mamba_shape& m, int batch,
                            const std::string& prefix, int rounds) {
  const update_step step{m, batch};
  auto c = measure(
      t, copy, prefix + "_b" + std::to_string(batch), "state_bytes_per_s", step.bytes(),
      [&](cudaStream_t s) { return cuda::ssd_update(step.p, s); }, rounds);
  step.describe(c);
  return c;
}

std::vector<comparison> bench_ssd_update_variants(timer& t, copy_baseline& copy,
                                                  const mamba_shape& m, int batch,
                                                  const std::vector<int>& variants, int rounds) {
  const update_step step{m, batch};
  std::vector<comparison> out;
  for (const int v : variants) {
    auto c = measure(
        t, copy, "ssd_update_" + m.label + "_b" + std::to_string(batch), "state_bytes_per_s",
        step.bytes(), [&](cudaStream_t s) { return cuda::ssd_update_variant(step.p, v, s); },
        rounds);
    step.describe(c);
    c.extra["update_variant"] = v;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<comparison> bench_ssd_scan(timer& t, copy_baseline& copy, const mamba_shape& m,
                                       int rows, int tokens, int rounds) {
  const std::size_t n_tokens = static_cast<std::size_t>(rows) * tokens;
  const std::size_t state_elems = std::size_t{1} * rows * m.heads * m.head_dim * m.state_size;
  auto state = alloc(state_elems * sizeof(float));
  const ssd_batch in{m, n_tokens};
  auto y = alloc(n_tokens * static_cast<std::size_t>(in.xw) * sizeof(float));
  const auto cu = cu_seqlens(rows, tokens);
  const auto slots = shuffled_slots(rows, 67);
  const std::vector<std::uint8_t> fresh(static_cast<std::size_t>(rows), 0);
  const auto d_cu = upload(cu), d_slots = upload(slots), d_fresh = upload(fresh);
  const mstar::kernels::ssd_scan_varlen_params p{in.w,
                                                 in.in,
                                                 y.as<float>(),
                                                 device_span<std::int32_t>(d_cu, cu.size()),
                                                 state.as<float>(),
                                                 device_span<std::int32_t>(d_slots, slots.size()),
                                                 device_span<std::uint8_t>(d_fresh, fresh.size())};
  const auto T = static_cast<std::int64_t>(n_tokens);
  const std::size_t ws_bytes = cuda::ssd_scan_workspace_bytes(in.w, T, rows);
  auto ws = alloc(std::max<std::size_t>(ws_bytes, 256));
  const cuda::ssd_workspace workspace{ws.data(), ws_bytes, T, 0};
  const double bytes =
      static_cast<double>(n_tokens) * static_cast<double>(in.row + in.xw) * sizeof(float) +
      static_cast<double>(state_elems) * sizeof(float);
  const std::string name =
      "ssd_scan_" + m.label + "_" + std::to_string(rows) + "x" + std::to_string(tokens);
  std::vector<comparison> out;
  out.push_back(measure(
      t, copy, name, "bytes_per_s", bytes,
      [&](cudaStream_t s) { return cuda::ssd_scan_varlen(p, workspace, s); }, rounds));
  out.push_back(measure(
      t, copy, name + "_sequential", "bytes_per_s", bytes,
      [&](cudaStream_t s) { return cuda::ssd_scan_varlen(p, s); }, rounds));
  // Rows shorter than the default threshold also every row chunked: where
  // chunks start to pay for short rows, and for many of them.
  const std::size_t all_bytes = cuda::ssd_scan_workspace_bytes(in.w, T, rows, 1);
  auto all_ws =
      alloc(std::max<std::size_t>(tokens < cuda::ssd_default_chunked_from ? all_bytes : 0, 256));
  if (tokens < cuda::ssd_default_chunked_from && all_bytes > 0) {
    const cuda::ssd_workspace every_row{all_ws.data(), all_bytes, T, 1};
    out.push_back(measure(
        t, copy, name + "_chunked", "bytes_per_s", bytes,
        [&](cudaStream_t s) { return cuda::ssd_scan_varlen(p, every_row, s); }, rounds));
  }
  for (auto& c : out) {
    c.extra["rows"] = rows;
    c.extra["tokens_per_row"] = tokens;
    c.extra["tokens_per_s"] = static_cast<double>(n_tokens) / (c.extra["us_per_call"] * 1e-6);
  }
  out[0].extra["workspace_MiB"] = static_cast<double>(ws_bytes) / (1 << 20);
  out[0].extra["speedup_vs_sequential"] = out[1].extra["us_per_call"] / out[0].extra["us_per_call"];
  return out;
}

comparison bench_conv(timer& t, copy_baseline& copy, const mamba_shape& m, int rows, int tokens,
                      int rounds) {
  const int channels = m.conv_channels();
  const int width = m.conv_width;
  const std::size_t n_tokens = static_cast<std::size_t>(rows) * tokens;
  const std::size_t io_elems = n_tokens * static_cast<std::size_t>(channels);
  const std::size_t state_elems = std::size_t{1} * rows * channels * (width - 1);
  auto x = alloc(io_elems * sizeof(float));
  fill_random(x.data(), io_elems * sizeof(float), false, 71);
  auto out = alloc(io_elems * sizeof(float));
  auto state = alloc(state_elems * sizeof(float));
  fill_random(state.data(), state_elems * sizeof(float), false, 73);
  const std::size_t w_elems = static_cast<std::size_t>(channels) * (width + 1);
  auto weights = alloc(w_elems * sizeof(float));
  fill_random(weights.data(), w_elems * sizeof(float), false, 79);
  const float* wp = weights.as<const float>();
  const mstar::kernels::conv_weights w{wp, wp + std::int64_t{channels} * width, channels, width,
                                       true};
  const auto slots = shuffled_slots(rows, 83);
  const auto d_slots = upload(slots);
  const auto slot_span = device_span<std::int32_t>(d_slots, slots.size());
  double bytes = 2.0 * static_cast<double>(io_elems) * sizeof(float) +
                 static_cast<double>(state_elems) * sizeof(float);
  std::string name;
  std::function<cudaError_t(cudaStream_t)> launch;
  const auto cu = cu_seqlens(rows, tokens);
  const std::vector<std::uint8_t> fresh(static_cast<std::size_t>(rows), 0);
  const auto d_cu = upload(cu), d_fresh = upload(fresh);
  if (tokens == 1) {
    name = "conv_update_" + m.label + "_b" + std::to_string(rows);
    bytes += static_cast<double>(state_elems) * sizeof(float);  // the window read too
    const mstar::kernels::causal_conv_update_params p{
        w, x.as<const float>(), 0, out.as<float>(), rows, state.as<float>(), slot_span, {}};
    launch = [p](cudaStream_t s) { return cuda::causal_conv_update(p, s); };
  } else {
    name = "conv_prefill_" + m.label + "_" + std::to_string(rows) + "x" + std::to_string(tokens);
    const mstar::kernels::causal_conv_varlen_params p{
        w,
        x.as<const float>(),
        0,
        out.as<float>(),
        device_span<std::int32_t>(d_cu, cu.size()),
        state.as<float>(),
        slot_span,
        device_span<std::uint8_t>(d_fresh, fresh.size())};
    launch = [p](cudaStream_t s) { return cuda::causal_conv_varlen(p, s); };
  }
  auto c = measure(t, copy, name, "bytes_per_s", bytes, launch, rounds);
  c.extra["rows"] = rows;
  c.extra["tokens_per_row"] = tokens;
  c.extra["channels"] = channels;
  return c;
}

comparison bench_gated_norm(timer& t, copy_baseline& copy, const mamba_shape& m, int rows,
                            int tokens, int rounds) {
  const std::int64_t n = std::int64_t{rows} * tokens;
  const std::int64_t channels = std::int64_t{m.heads} * m.head_dim;
  // The gate is the first `channels` columns of the in-projection's output
  // ([z | xBC | dt]), as Nemotron-H's mixer hands it over.
  const std::int64_t wide = 2 * channels + 2 * std::int64_t{m.groups} * m.state_size + m.heads;
  const auto elems = [](std::int64_t e) { return static_cast<std::size_t>(e); };
  auto x = alloc(elems(n * channels) * sizeof(float));
  auto gate = alloc(elems(n * wide) * sizeof(float));
  auto weight = alloc(elems(channels) * sizeof(float));
  auto out = alloc(elems(n * channels) * sizeof(std::uint16_t));
  fill_random(x.data(), elems(n * channels) * sizeof(float), false, 89);
  fill_random(gate.data(), elems(n * wide) * sizeof(float), false, 97);
  fill_random(weight.data(), elems(channels) * sizeof(float), false, 101);
  const mstar::kernels::gated_rms_norm_params p{
      {x.as<const float>(), {n, channels}, {channels, 1}},
      {gate.as<const float>(), {n, channels}, {wide, 1}},
      {weight.as<const float>(), {channels}, {1}},
      {},
      channels / m.groups,
      1e-5F,
      {out.as<std::uint16_t>(), {n, channels}, {channels, 1}}};
  const double bytes =
      static_cast<double>(n * channels) * (2 * sizeof(float) + sizeof(std::uint16_t));
  auto c = measure(
      t, copy, "gated_norm_" + m.label + "_" + std::to_string(rows) + "x" + std::to_string(tokens),
      "bytes_per_s", bytes, [p](cudaStream_t s) { return cuda::gated_rms_norm(p, s); }, rounds);
  c.extra["rows"] = rows;
  c.extra["tokens_per_row"] = tokens;
  c.extra["group"] = static_cast<double>(channels / m.groups);
  return c;
}

}  // namespace mstar::bench::gpu
