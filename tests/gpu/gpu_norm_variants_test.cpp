// The norms' later forms (kernels/cuda/math.hpp: gated_rms_norm_variant
// 2-6, add_rms_norm_variant 2-4) against form 1, the default, byte for
// byte: same products, same order of the sums, so the same bits, at the
// Nemotron-H decode shapes (0.56B and 8B, 1 / 64 / 256 rows) and awkward
// ones (rows that leave a block part full, groups of 128 and 256, a grid
// that loops, strided rows), with the aliasing the params allow (out on x or
// the gate; out on the residual or the delta). Each form's input is written
// by the kernel launched just before it on the same stream, chained, so a
// form that reads it before its chained wait shows. Form 1 is also held to
// the CPU reference, so two forms that skip the same elements cannot agree
// on poison.
#include <gtest/gtest.h>

#include "kernels/cuda/math.hpp"
#include "kernels/math.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::device_vector;
using test::gpu::poisoned;
using test::gpu::upload;
using test::gpu::within;
namespace budget = test::gpu::budget;

int sm_count() {
  int sms = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  return sms;
}

// Chained launches on for the test's duration (the forms' early weight
// reads are what is under test), restored after.
class chained_scope {
 public:
  chained_scope() : before_(cuda::chained_launches()) { cuda::set_chained_launches(true); }
  chained_scope(const chained_scope&) = delete;
  chained_scope& operator=(const chained_scope&) = delete;
  ~chained_scope() { cuda::set_chained_launches(before_); }

 private:
  bool before_;
};

// Row ids 0 .. rows - 1 on the device.
device_vector<std::int32_t> row_ids(std::int64_t rows) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>(i);
  return upload(ids);
}

// `dst` = `src` ([rows, cols]) through a chained kernel on `s` (embedding of
// every row: a block a row, released at its start), so the launch after it
// may start while it still writes `dst`.
void copy_by_kernel(const device_vector<float>& src, device_vector<float>& dst, std::int64_t cols,
                    const device_vector<std::int32_t>& ids, cudaStream_t s) {
  const auto rows = static_cast<std::int64_t>(src.size()) / cols;
  ASSERT_EQ(
      cuda::embedding({vector<const std::int32_t>(ids.data(), rows),
                       matrix<const float>(src.data(), rows, cols), matrix(dst.data(), rows, cols)},
                      s),
      cudaSuccess);
}

// ---- gated_rms_norm ----

enum class alias { none, x, gate };

struct gated_case {
  std::int64_t rows, channels, group;
  std::int64_t wide;  ///< the gate's row stride (>= channels); 0: no gate
  bool f32, bf16;
  alias out_on = alias::none;

  [[nodiscard]] std::string name() const {
    static constexpr const char* on[] = {"", " out on x", " out on the gate"};
    return std::to_string(rows) + " x " + std::to_string(channels) + " groups of " +
           std::to_string(group) +
           (wide != 0 ? " gated (stride " + std::to_string(wide) + ")" : "") + (f32 ? " f32" : "") +
           (bf16 ? " bf16" : "") + on[static_cast<int>(out_on)];
  }
};

struct gated_result {
  std::vector<float> f32;  // out, or the buffer it aliases
  std::vector<std::uint16_t> bf16;
};

struct gated_inputs {
  std::vector<float> x, zw, w;
  device_vector<float> x_src, zw_src, w_dev;
  device_vector<std::int32_t> ids;

  gated_inputs(test::random_tensors& rng, const gated_case& c)
      : x(rng.floats(static_cast<std::size_t>(c.rows * c.channels), -2.0F, 2.0F)),
        zw(rng.floats(static_cast<std::size_t>(c.rows * std::max(c.wide, c.channels)), -4.0F,
                      4.0F)),
        w(rng.floats(static_cast<std::size_t>(c.channels))),
        x_src(upload(x)),
        zw_src(upload(zw)),
        w_dev(upload(w)),
        ids(row_ids(c.rows)) {}
};

gated_result run_gated(const gated_case& c, const gated_inputs& in, int variant,
                       const cuda::stream& s) {
  const std::int64_t wide = std::max(c.wide, c.channels);
  auto x = poisoned<float>(in.x.size());
  auto zw = poisoned<float>(in.zw.size());
  copy_by_kernel(in.zw_src, zw, wide, in.ids, s.get());
  copy_by_kernel(in.x_src, x, c.channels, in.ids, s.get());  // the launch the form chains on
  auto out = poisoned<float>(c.out_on == alias::none && c.f32 ? in.x.size() : 0);
  auto out16 = poisoned<std::uint16_t>(c.bf16 ? in.x.size() : 0);
  gated_rms_norm_params p{matrix<const float>(x.data(), c.rows, c.channels),
                          c.wide != 0
                              ? view<const float, 2>{zw.data(), {c.rows, c.channels}, {wide, 1}}
                              : view<const float, 2>{},
                          vector<const float>(in.w_dev.data(), c.channels),
                          {},
                          c.group,
                          1e-5F};
  if (c.f32) {
    switch (c.out_on) {
      case alias::none:
        p.out = matrix(out.data(), c.rows, c.channels);
        break;
      case alias::x:
        p.out = matrix(x.data(), c.rows, c.channels);
        break;
      case alias::gate:
        p.out = view<float, 2>{zw.data(), {c.rows, c.channels}, {wide, 1}};
        break;
    }
  }
  if (c.bf16)
    p.out_bf16 = matrix(out16.data(), c.rows, c.channels);
  EXPECT_EQ(cuda::gated_rms_norm_variant(p, variant, s.get()), cudaSuccess);
  EXPECT_TRUE(s.synchronize());
  gated_result r;
  if (c.f32) {
    r.f32 = c.out_on == alias::none ? out.download()
            : c.out_on == alias::x  ? x.download()
                                    : zw.download();
  }
  r.bf16 = out16.download();
  return r;
}

// Form 1 against the CPU reference (f32 out, or bf16 within its budget).
void expect_first_form_right(const gated_case& c, const gated_inputs& in, const gated_result& r) {
  const std::int64_t wide = std::max(c.wide, c.channels);
  std::vector<float> ref(in.x.size());
  ASSERT_TRUE(gated_rms_norm(
      {matrix(in.x.data(), c.rows, c.channels),
       c.wide != 0 ? view<const float, 2>{in.zw.data(), {c.rows, c.channels}, {wide, 1}}
                   : view<const float, 2>{},
       vector(in.w.data(), c.channels), matrix(ref.data(), c.rows, c.channels), c.group, 1e-5F}));
  if (c.f32) {
    std::vector<float> got = r.f32;
    if (c.out_on == alias::gate) {  // out's rows inside the wide gate matrix
      got.clear();
      for (std::int64_t t = 0; t < c.rows; ++t) {
        got.insert(got.end(), r.f32.begin() + t * wide, r.f32.begin() + t * wide + c.channels);
      }
    }
    EXPECT_TRUE(within(got, ref, budget::f32_reduction));
  }
  if (c.bf16) {
    std::vector<float> wide16(r.bf16.size());
    for (std::size_t i = 0; i < r.bf16.size(); ++i)
      wide16[i] = bf16_bits_to_float(r.bf16[i]);
    EXPECT_TRUE(within(wide16, ref, budget::bf16_out));
  }
}

void expect_gated_forms_equal(test::random_tensors& rng, const gated_case& c) {
  SCOPED_TRACE(c.name());
  const gated_inputs in{rng, c};
  auto s = cuda::stream::make();
  ASSERT_TRUE(s);
  const gated_result first = run_gated(c, in, 1, *s);
  expect_first_form_right(c, in, first);
  for (int v = 2; v < cuda::gated_rms_norm_variants; ++v) {
    SCOPED_TRACE("form " + std::to_string(v));
    const gated_result got = run_gated(c, in, v, *s);
    EXPECT_TRUE(got.f32 == first.f32) << "f32 output differs from form 1";
    EXPECT_TRUE(got.bf16 == first.bf16) << "bf16 output differs from form 1";
  }
}

TEST(gpu_norm_variants, gated_rms_norm_forms_equal_the_warp_form_at_the_model_shapes) {
  MSTAR_REQUIRE_GPU();
  const chained_scope chained;
  auto rng = test::gpu::seeded(1201);
  // 0.56B: 64 heads x 64 (4,096 channels), 8 groups of 512, z the first
  // columns of in_proj's 10,304-wide rows; 8B: 128 x 64, groups of 1,024,
  // rows of 18,560. bf16 out (the model's), and f32 in place on y (f32 models).
  for (const std::int64_t rows : {1, 64, 256}) {
    expect_gated_forms_equal(rng, {rows, 4096, 512, 10304, false, true});
    expect_gated_forms_equal(rng, {rows, 8192, 1024, 18560, false, true});
    expect_gated_forms_equal(rng, {rows, 4096, 512, 10304, true, false, alias::x});
  }
}

TEST(gpu_norm_variants, gated_rms_norm_forms_equal_the_warp_form_at_awkward_shapes) {
  MSTAR_REQUIRE_GPU();
  const chained_scope chained;
  auto rng = test::gpu::seeded(1202);
  for (const std::int64_t rows : {3, 17, 133}) {
    expect_gated_forms_equal(rng, {rows, 384, 128, 0, true, true});     // 3 groups, no gate
    expect_gated_forms_equal(rng, {rows, 512, 256, 524, true, false});  // gate rows 524 apart
    expect_gated_forms_equal(rng, {rows, 1024, 0, 1040, true, true});   // one group of 1,024
    expect_gated_forms_equal(rng, {rows, 2048, 512, 2048, true, true, alias::x});
    expect_gated_forms_equal(rng, {rows, 1024, 256, 1100, true, true, alias::gate});
  }
  // Enough items that the one-warp blocks (form 3) loop past their grid.
  const std::int64_t looping = std::int64_t{sm_count()} * 64 / 8 + 7;
  expect_gated_forms_equal(rng, {looping, 1024, 128, 1028, true, true});
}

// ---- add_rms_norm ----

struct add_case {
  std::int64_t rows, hidden, stride;  ///< stride: the residual's row stride (>= hidden)
  bool delta, f32, bf16;
  enum class on { none, residual, delta } out_on = on::none;

  [[nodiscard]] std::string name() const {
    static constexpr const char* where[] = {"", " out on the residual", " out on the delta"};
    return std::to_string(rows) + " x " + std::to_string(hidden) + " (stride " +
           std::to_string(stride) + ")" + (delta ? " + delta" : "") + (f32 ? " f32" : "") +
           (bf16 ? " bf16" : "") + where[static_cast<int>(out_on)];
  }
};

struct add_result {
  std::vector<float> residual, delta, out;
  std::vector<std::uint16_t> bf16;
};

struct add_inputs {
  std::vector<float> residual, delta, w;
  device_vector<float> residual_src, delta_src, w_dev;
  device_vector<std::int32_t> ids;

  add_inputs(test::random_tensors& rng, const add_case& c)
      : residual(rng.floats(static_cast<std::size_t>(c.rows * c.stride), -3.0F, 3.0F)),
        delta(rng.floats(static_cast<std::size_t>(c.rows * c.hidden), -2.0F, 2.0F)),
        w(rng.floats(static_cast<std::size_t>(c.hidden))),
        residual_src(upload(residual)),
        delta_src(upload(delta)),
        w_dev(upload(w)),
        ids(row_ids(c.rows)) {}
};

add_result run_add(const add_case& c, const add_inputs& in, int variant, const cuda::stream& s) {
  auto res = poisoned<float>(in.residual.size());
  auto delta = poisoned<float>(in.delta.size());
  copy_by_kernel(in.delta_src, delta, c.hidden, in.ids, s.get());
  copy_by_kernel(in.residual_src, res, c.stride, in.ids, s.get());  // the launch the form chains on
  auto out = poisoned<float>(c.out_on == add_case::on::none && c.f32 ? in.delta.size() : 0);
  auto out16 = poisoned<std::uint16_t>(c.bf16 ? in.delta.size() : 0);
  const view<float, 2> rv{res.data(), {c.rows, c.hidden}, {c.stride, 1}};
  add_rms_norm_params p{
      rv,
      c.delta ? matrix<const float>(delta.data(), c.rows, c.hidden) : view<const float, 2>{},
      vector<const float>(in.w_dev.data(), c.hidden),
      {},
      {},
      1e-5F};
  if (c.f32) {
    switch (c.out_on) {
      case add_case::on::none:
        p.out = matrix(out.data(), c.rows, c.hidden);
        break;
      case add_case::on::residual:
        p.out = rv;
        break;
      case add_case::on::delta:
        p.out = matrix(delta.data(), c.rows, c.hidden);
        break;
    }
  }
  if (c.bf16)
    p.out_bf16 = matrix(out16.data(), c.rows, c.hidden);
  EXPECT_EQ(cuda::add_rms_norm_variant(p, variant, s.get()), cudaSuccess);
  EXPECT_TRUE(s.synchronize());
  return {res.download(), delta.download(), out.download(), out16.download()};
}

void expect_add_forms_equal(test::random_tensors& rng, const add_case& c) {
  SCOPED_TRACE(c.name());
  const add_inputs in{rng, c};
  auto s = cuda::stream::make();
  ASSERT_TRUE(s);
  const add_result first = run_add(c, in, 1, *s);
  // Form 1 against the CPU reference: the residual after the add.
  auto ref_res = in.residual;
  std::vector<float> ref(in.delta.size());
  ASSERT_TRUE(add_rms_norm(
      {view<float, 2>{ref_res.data(), {c.rows, c.hidden}, {c.stride, 1}},
       c.delta ? matrix<const float>(in.delta.data(), c.rows, c.hidden) : view<const float, 2>{},
       vector<const float>(in.w.data(), c.hidden),
       matrix(ref.data(), c.rows, c.hidden),
       {},
       1e-5F}));
  if (c.f32 && c.out_on == add_case::on::residual) {
    // The f32 output written over the residual: its rows hold the normalised
    // values (the stride's tail keeps the sum's input, untouched).
    auto ref_out_res = in.residual;
    for (std::int64_t r = 0; r < c.rows; ++r)
      std::copy_n(ref.begin() + r * c.hidden, c.hidden, ref_out_res.begin() + r * c.stride);
    EXPECT_TRUE(within(first.residual, ref_out_res, budget::f32_reduction));
  } else {
    EXPECT_TRUE(within(first.residual, ref_res, budget::f32_elementwise));
  }
  if (c.f32 && c.out_on == add_case::on::delta) {
    EXPECT_TRUE(within(first.delta, ref, budget::f32_reduction));
  }
  if (c.f32 && c.out_on == add_case::on::none) {
    EXPECT_TRUE(within(first.out, ref, budget::f32_reduction));
  }
  if (c.bf16) {
    std::vector<float> wide16(first.bf16.size());
    for (std::size_t i = 0; i < first.bf16.size(); ++i)
      wide16[i] = bf16_bits_to_float(first.bf16[i]);
    EXPECT_TRUE(within(wide16, ref, budget::bf16_out));
  }
  for (int v = 2; v < cuda::add_rms_norm_variants; ++v) {
    SCOPED_TRACE("form " + std::to_string(v));
    const add_result got = run_add(c, in, v, *s);
    EXPECT_TRUE(got.residual == first.residual) << "residual differs from form 1";
    EXPECT_TRUE(got.delta == first.delta) << "delta differs from form 1";
    EXPECT_TRUE(got.out == first.out) << "f32 output differs from form 1";
    EXPECT_TRUE(got.bf16 == first.bf16) << "bf16 output differs from form 1";
  }
}

TEST(gpu_norm_variants, add_rms_norm_forms_equal_the_first_at_the_model_shapes) {
  MSTAR_REQUIRE_GPU();
  const chained_scope chained;
  auto rng = test::gpu::seeded(1203);
  // Hidden 2,048 (0.56B) and 4,096 (8B): the bf16 model's launch (bf16 out
  // only) and the f32 model's (f32 out).
  for (const std::int64_t rows : {1, 64, 256}) {
    for (const std::int64_t hidden : {2048, 4096}) {
      expect_add_forms_equal(rng, {rows, hidden, hidden, true, false, true});
      expect_add_forms_equal(rng, {rows, hidden, hidden, true, true, false});
    }
  }
}

TEST(gpu_norm_variants, add_rms_norm_forms_equal_the_first_at_awkward_shapes) {
  MSTAR_REQUIRE_GPU();
  const chained_scope chained;
  auto rng = test::gpu::seeded(1204);
  using on = add_case::on;
  // 4 / 8 / 16 columns a thread with the last ones partly past the row, and
  // 5,000 (the loop form, which every form runs as form 1).
  for (const std::int64_t hidden : {1000, 2000, 3000, 5000}) {
    for (const std::int64_t rows : {3, 33}) {
      expect_add_forms_equal(rng, {rows, hidden, hidden + 24, true, true, true});
      expect_add_forms_equal(rng, {rows, hidden, hidden + 24, false, true, true});
      expect_add_forms_equal(rng, {rows, hidden, hidden + 24, true, false, true});
      expect_add_forms_equal(rng, {rows, hidden, hidden + 24, true, true, false, on::residual});
      expect_add_forms_equal(rng, {rows, hidden, hidden, true, true, true, on::delta});
    }
  }
  // More rows than the cluster forms' grid (65,535 along y): their rows loop.
  expect_add_forms_equal(rng, {65600, 256, 256, true, false, true});
}

TEST(gpu_norm_variants, variant_launchers_refuse_indices_outside_their_tables) {
  MSTAR_REQUIRE_GPU();
  auto x = poisoned<float>(8 * 128);
  auto w = poisoned<float>(128);
  auto out = poisoned<float>(8 * 128);
  const gated_rms_norm_params g{matrix<const float>(x.data(), 8, 128),
                                {},
                                vector<const float>(w.data(), 128),
                                matrix(out.data(), 8, 128),
                                0,
                                1e-5F};
  EXPECT_EQ(cuda::gated_rms_norm_variant(g, cuda::gated_rms_norm_variants, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::gated_rms_norm_variant(g, -2, nullptr), cudaErrorInvalidValue);
  const add_rms_norm_params a{
      matrix(x.data(), 8, 128), {}, vector<const float>(w.data(), 128), matrix(out.data(), 8, 128)};
  EXPECT_EQ(cuda::add_rms_norm_variant(a, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::add_rms_norm_variant(a, cuda::add_rms_norm_variants, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace mstar::kernels
