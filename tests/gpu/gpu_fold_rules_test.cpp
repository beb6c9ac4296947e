// The RMS-form GEMV's fold rules (kernels/cuda/linear.cu:
// rms_norm_linear_bf16_fits), checked on the host alone: the batch-1 folds
// (conv step, token lookup, activation epilogue, argmax, KV append) are
// taken with the operands the models pass and refused, before any launch,
// wherever the kernel could not compute what the separate launches do.
// No device is needed: the rules compare pointers and sizes and never read
// memory, so the operands point into a host buffer. These run in CI, where
// the kernels themselves never do (gpu_linear has their bit-for-bit tests).
#include <array>
#include <cstddef>
#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda/math.hpp"
#include "kernels/kv_geometry.hpp"

namespace mstar::kernels {
namespace {

// Where the operands point: never read, 16-byte aligned as device memory is.
struct fake_memory {
  alignas(256) std::array<std::byte, 1 << 16> bytes{};
  template <class T>
  T* at(std::size_t offset) {
    return reinterpret_cast<T*>(bytes.data() + offset);
  }
};

constexpr std::int64_t rule_k = 64;
constexpr std::int64_t rule_n = 48;  // q 16, k 16, v 16 where the append takes it

// An RMS-form product the kernel takes: x [1, 64] f32, weight [48, 64]
// bf16, an f32 output row.
cuda::rms_norm_linear_bf16_params plain(fake_memory& m) {
  cuda::rms_norm_linear_bf16_params p;
  p.x = contiguous<const float>(m.at<const float>(0), std::array<std::int64_t, 2>{1, rule_k});
  p.norm_weight = contiguous<const float>(m.at<const float>(1024), std::array{rule_k});
  p.weight =
      contiguous<const std::uint16_t>(m.at<const std::uint16_t>(2048), std::array{rule_n, rule_k});
  p.out_f32 = contiguous(m.at<float>(16384), std::array<std::int64_t, 2>{1, rule_n});
  return p;
}

void as_bf16_output(cuda::rms_norm_linear_bf16_params& p, fake_memory& m) {
  p.out_f32 = {};
  p.out_bf16 = contiguous(m.at<std::uint16_t>(16384), std::array<std::int64_t, 2>{1, rule_n});
}

TEST(gpu_fold_rules, the_plain_rms_form_takes_one_aligned_row) {
  fake_memory m;
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(plain(m)));
  auto bf16 = plain(m);
  as_bf16_output(bf16, m);
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(bf16));
  auto both = plain(m);
  both.out_bf16 = bf16.out_bf16;
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(both)) << "two outputs";
  auto accumulating_bf16 = bf16;
  accumulating_bf16.accumulate = true;
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(accumulating_bf16)) << "accumulating bf16";
  auto two_rows = plain(m);
  two_rows.x =
      contiguous<const float>(m.at<const float>(0), std::array<std::int64_t, 2>{2, rule_k});
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(two_rows)) << "two rows";
  auto misaligned = plain(m);
  misaligned.weight =
      contiguous<const std::uint16_t>(m.at<const std::uint16_t>(2050), std::array{rule_n, rule_k});
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(misaligned)) << "weights off 16 bytes";
  auto odd_k = plain(m);
  odd_k.x = contiguous<const float>(m.at<const float>(0), std::array<std::int64_t, 2>{1, 60});
  odd_k.norm_weight =
      contiguous<const float>(m.at<const float>(1024), std::array<std::int64_t, 1>{60});
  odd_k.weight = contiguous<const std::uint16_t>(m.at<const std::uint16_t>(2048),
                                                 std::array<std::int64_t, 2>{rule_n, 60});
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(odd_k)) << "K not a multiple of 8";
}

// The conv step on output features [first, first + channels): widths 2..4,
// inside the output, an f32 product taken as it is, a slot to update.
TEST(gpu_fold_rules, the_conv_fold_takes_widths_2_to_4_inside_an_f32_output) {
  fake_memory m;
  const std::vector<std::int32_t> slot{0};
  struct fold_case {
    const char* what;
    std::int64_t first;
    std::int32_t channels, width;
    bool bf16_out, accumulate, no_slots;
    bool taken;
  };
  const fold_case cases[] = {
      {"taken", 8, 16, 4, false, false, false, true},
      {"width 2", 8, 16, 2, false, false, false, true},
      {"the run ends at N", 32, 16, 4, false, false, false, true},
      {"width past 4", 8, 16, 5, false, false, false, false},
      {"width 1", 8, 16, 1, false, false, false, false},
      {"the run past N", 40, 16, 4, false, false, false, false},
      {"before feature 0", -1, 16, 4, false, false, false, false},
      {"a bf16 product", 8, 16, 4, true, false, false, false},
      {"accumulating", 8, 16, 4, false, true, false, false},
      {"no slot index", 8, 16, 4, false, false, true, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto p = plain(m);
    if (c.bf16_out)
      as_bf16_output(p, m);
    p.accumulate = c.accumulate;
    p.conv = cuda::conv_step_fold{{m.at<const float>(20480), nullptr, c.channels, c.width, true},
                                  c.first,
                                  m.at<float>(24576),
                                  m.at<float>(28672),
                                  c.no_slots ? std::span<const std::int32_t>{} : slot,
                                  {}};
    EXPECT_EQ(cuda::rms_norm_linear_bf16_fits(p), c.taken);
  }
}

// The token lookup: a table of K-wide rows, an id, a row to write; beside
// the conv fold too (a recurrent first layer).
TEST(gpu_fold_rules, the_lookup_fold_takes_a_table_of_k_wide_rows) {
  fake_memory m;
  const auto lookup = [&](std::int64_t cols, std::int64_t row_stride, bool ids, bool out) {
    return cuda::embedding_fold{
        ids ? contiguous<const std::int32_t>(m.at<const std::int32_t>(32768), std::array{1L})
            : view<const std::int32_t, 1>{},
        view<const float, 2>{m.at<const float>(36864), {10, cols}, {row_stride, 1}},
        out ? m.at<float>(0) : nullptr};
  };
  auto p = plain(m);
  p.embed = lookup(rule_k, rule_k, true, true);
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(p));
  const std::vector<std::int32_t> slot{0};
  auto with_conv = p;
  with_conv.conv = cuda::conv_step_fold{{m.at<const float>(20480), nullptr, 16, 4, true},
                                        8,
                                        m.at<float>(24576),
                                        m.at<float>(28672),
                                        slot,
                                        {}};
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(with_conv)) << "beside the conv fold";
  p.embed = lookup(rule_k + 8, rule_k + 8, true, true);
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(p)) << "rows wider than K";
  p.embed = lookup(rule_k, rule_k + 8, true, true);
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(p)) << "rows apart by more than K";
  p.embed = lookup(rule_k, rule_k, false, true);
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(p)) << "no id";
  p.embed = lookup(rule_k, rule_k, true, false);
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(p)) << "no row to write";
}

// The activation epilogue: a bf16 output alone.
TEST(gpu_fold_rules, the_activation_epilogue_takes_a_bf16_output_and_no_other_fold) {
  fake_memory m;
  auto p = plain(m);
  as_bf16_output(p, m);
  p.out_activation = activation::relu2;
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(p));
  p.out_activation = activation::silu;
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(p));
  auto f32 = plain(m);
  f32.out_activation = activation::relu2;
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(f32)) << "an f32 output";
  auto with_lookup = p;
  with_lookup.embed = cuda::embedding_fold{
      contiguous<const std::int32_t>(m.at<const std::int32_t>(32768), std::array{1L}),
      contiguous<const float>(m.at<const float>(36864), std::array{10L, rule_k}), m.at<float>(0)};
  EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(with_lookup)) << "beside the lookup";
}

// The argmax: an f32 output taken as it is, alone, a draw and an 8-byte
// aligned meeting place.
TEST(gpu_fold_rules, the_argmax_fold_takes_an_f32_output_alone) {
  fake_memory m;
  auto p = plain(m);
  p.argmax = cuda::argmax_fold{m.at<std::int32_t>(40960), m.at<cuda::argmax_fold_state>(41216)};
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(p));
  const auto refused = [](cuda::rms_norm_linear_bf16_params bad, const char* what) {
    EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(bad)) << what;
  };
  {
    auto bad = p;
    as_bf16_output(bad, m);
    refused(bad, "a bf16 output");
    bad.out_activation = activation::relu2;
    refused(bad, "with the activation");
  }
  {
    auto bad = p;
    bad.accumulate = true;
    refused(bad, "accumulating");
  }
  {
    auto bad = p;
    bad.embed = cuda::embedding_fold{
        contiguous<const std::int32_t>(m.at<const std::int32_t>(32768), std::array{1L}),
        contiguous<const float>(m.at<const float>(36864), std::array{10L, rule_k}), m.at<float>(0)};
    refused(bad, "with the lookup");
  }
  {
    const std::vector<std::int32_t> slot{0};
    auto bad = p;
    bad.conv = cuda::conv_step_fold{{m.at<const float>(20480), nullptr, 16, 4, true},
                                    8,
                                    m.at<float>(24576),
                                    m.at<float>(28672),
                                    slot,
                                    {}};
    refused(bad, "with the conv");
  }
  {
    auto bad = p;
    bad.argmax->out = nullptr;
    refused(bad, "no draw");
    bad = p;
    bad.argmax->state = nullptr;
    refused(bad, "no state");
    bad.argmax->state = m.at<cuda::argmax_fold_state>(41220);
    refused(bad, "a state off 8 bytes");
  }
}

// The KV append: K and V inside the output, a one-row decode table, an
// arena append_kv takes, alone.
TEST(gpu_fold_rules, the_kv_append_fold_takes_k_and_v_inside_the_output_of_one_decode_row) {
  fake_memory m;
  const std::vector<std::int32_t> qo{0, 1}, qo2{0, 1, 2}, indptr{0, 1}, indptr2{0, 1, 2},
      indices{3, 4}, last{5}, last2{5, 5}, page{3}, page2{3, 4}, offset{4}, offset2{4, 4};
  const kv_page_table one_row{qo, indptr, indices, last, page, offset};
  const kv_geometry g{16, 2, 2, 8, mstar::dtype::bfloat16};  // E = 16
  auto p = plain(m);
  p.append = cuda::kv_append_fold{{m.at<std::byte>(45056), g}, 1, one_row, 16};
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(p));
  auto f32_arena = p;
  f32_arena.append->arena.geometry.dtype = mstar::dtype::float32;
  EXPECT_TRUE(cuda::rms_norm_linear_bf16_fits(f32_arena)) << "an f32 arena";
  const auto refused = [](cuda::rms_norm_linear_bf16_params bad, const char* what) {
    EXPECT_FALSE(cuda::rms_norm_linear_bf16_fits(bad)) << what;
  };
  {
    auto bad = p;
    as_bf16_output(bad, m);
    refused(bad, "a bf16 output");
  }
  {
    auto bad = p;
    bad.accumulate = true;
    refused(bad, "accumulating");
  }
  {
    auto bad = p;
    bad.argmax = cuda::argmax_fold{m.at<std::int32_t>(40960), m.at<cuda::argmax_fold_state>(41216)};
    refused(bad, "with the argmax");
  }
  {
    auto bad = p;
    bad.append->table = {qo2, indptr2, indices, last2, page2, offset2};
    refused(bad, "two rows");
    bad.append->table = {qo, indptr, indices, last, {}, {}};
    refused(bad, "no decode arrays");
    bad.append->table = one_row;
    bad.append->first = 17;
    refused(bad, "V past the output");
    bad.append->first = -1;
    refused(bad, "K before feature 0");
    bad.append->first = 16;
    bad.append->layer = 2;
    refused(bad, "a layer past the page's");
    bad.append->layer = 1;
    bad.append->arena.base = nullptr;
    refused(bad, "no arena");
    bad.append->arena.base = m.at<std::byte>(45056);
    bad.append->arena.geometry.dtype = mstar::dtype::float16;
    refused(bad, "an f16 arena");
  }
}

}  // namespace
}  // namespace mstar::kernels
