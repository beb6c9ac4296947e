// Batched GPU sampling (kernels/cuda/sampling.hpp) against the CPU's
// `sample` (kernels/sampling.hpp): the same token for every row, seed and
// counter, greedy and sampled, with top-k and top-p cuts, masked (-inf)
// entries and ties; -1 exactly where the CPU returns an error.
#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>

#include "kernels/cuda/runtime.hpp"
#include "kernels/sampling.hpp"
#include "tests/gpu/gpu_support.hpp"

namespace mstar::kernels {
namespace {

using test::gpu::poisoned;
using test::gpu::upload;

// R rows of settings, as host arrays mirrored to the device.
struct settings {
  std::vector<float> temperature;
  std::vector<std::int32_t> top_k;
  std::vector<float> top_p;
  std::vector<std::uint64_t> seed;
  std::vector<std::uint64_t> counter;
};

// CPU answers: the id, or -1 for an error.
std::vector<std::int32_t> cpu_samples(const std::vector<float>& logits, std::int64_t vocab,
                                      const settings& s) {
  std::vector<std::int32_t> out;
  for (std::size_t r = 0; r < s.seed.size(); ++r) {
    const sampling_params p{
        contiguous(logits.data() + r * static_cast<std::size_t>(vocab), std::array{vocab}),
        s.temperature[r],
        s.top_k[r],
        s.top_p[r],
        s.seed[r],
        s.counter[r]};
    const auto id = sample(p);
    out.push_back(id ? *id : -1);
  }
  return out;
}

std::vector<std::int32_t> gpu_samples(const std::vector<float>& logits, std::int64_t vocab,
                                      const settings& s) {
  const auto rows = static_cast<std::int64_t>(s.seed.size());
  const auto d_logits = upload(logits);
  const auto d_t = upload(s.temperature);
  const auto d_k = upload(s.top_k);
  const auto d_p = upload(s.top_p);
  const auto d_seed = upload(s.seed);
  const auto d_counter = upload(s.counter);
  auto d_out = poisoned<std::int32_t>(s.seed.size(), 0x7f);
  const cuda::sample_batch_params p{
      contiguous<const float>(d_logits.data(), std::array{rows, vocab}),
      d_t.data(),
      d_k.data(),
      d_p.data(),
      d_seed.data(),
      d_counter.data(),
      d_out.data()};
  EXPECT_EQ(cuda::sample(p, nullptr), cudaSuccess);
  return d_out.download();
}

// Logits drawn from a few distinct values, so ties are common, some masked.
std::vector<float> tied_logits(test::random_tensors& rng, std::size_t n) {
  auto v = rng.ints(n, -6, 6);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] =
        v[i] == -6 ? -std::numeric_limits<float>::infinity() : 0.75F * static_cast<float>(v[i]);
  }
  return out;
}

// Greedy settings (temperature 0) for `rows` rows: the CPU's argmax.
settings greedy_settings(std::int64_t rows) {
  const auto n = static_cast<std::size_t>(rows);
  return settings{std::vector<float>(n, 0.0F), std::vector<std::int32_t>(n, 0),
                  std::vector<float>(n, 1.0F), std::vector<std::uint64_t>(n, 0),
                  std::vector<std::uint64_t>(n, 0)};
}

TEST(gpu_sampling, argmax_matches_the_cpu_with_ties_masks_and_bad_rows) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(601);
  const std::int64_t rows = 12, vocab = 5003;
  auto logits = tied_logits(rng, static_cast<std::size_t>(rows * vocab));
  logits[static_cast<std::size_t>(2 * vocab + 17)] = std::numeric_limits<float>::quiet_NaN();
  logits[static_cast<std::size_t>(3 * vocab + 1)] = std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < vocab; ++i)
    logits[static_cast<std::size_t>(4 * vocab + i)] = -std::numeric_limits<float>::infinity();
  const settings greedy = greedy_settings(rows);
  const auto ref = cpu_samples(logits, vocab, greedy);
  EXPECT_EQ(ref[2], -1);
  EXPECT_EQ(ref[4], -1);
  const auto d_logits = upload(logits);
  auto d_out = poisoned<std::int32_t>(static_cast<std::size_t>(rows), 0x7f);
  ASSERT_EQ(cuda::argmax(contiguous<const float>(d_logits.data(), std::array{rows, vocab}),
                         d_out.data(), nullptr),
            cudaSuccess);
  EXPECT_EQ(d_out.download(), ref);
  EXPECT_EQ(gpu_samples(logits, vocab, greedy), ref);
}

// Where a [rows, cols] matrix lies in a buffer of `size` floats: element
// (r, c) at offset + r * row_stride + c * col_stride.
struct layout {
  const char* name;
  std::int64_t offset, row_stride, col_stride, size;
};

// Packed rows (aligned only where cols is a multiple of 4), rows padded to
// 16 bytes (float4 loads with a few single ones at a row's end), the same
// one float off (single loads at unit stride), every second column and the
// transpose (strided loads).
std::vector<layout> argmax_layouts(std::int64_t rows, std::int64_t cols) {
  const std::int64_t padded = (cols + 3) / 4 * 4 + 4;
  return {{"packed", 0, cols, 1, rows * cols},
          {"padded rows", 0, padded, 1, rows * padded},
          {"misaligned start", 1, padded, 1, 1 + rows * padded},
          {"every second column", 0, 2 * cols, 2, rows * 2 * cols},
          {"transposed", 0, 1, rows, rows * cols}};
}

// kernels/cuda/sampling.cu's pieces of a row, one a block of a cluster of 8:
// piece k starts at k * piece_of(cols), clamped to the last entry.
std::int64_t piece_start(std::int64_t cols, std::int64_t k) {
  const std::int64_t piece = ((cols + 7) / 8 + 3) / 4 * 4;
  return std::min(cols - 1, k * piece);
}

// Row `kind` of `cols` entries: the tie-heavy logits with, by kind, the
// same maximum in several pieces, a NaN or +inf only in the last piece, no
// finite entry, the maximum at the last entry or at both ends, a +0 / -0
// tie, or one finite entry in the last piece.
constexpr int argmax_row_kinds = 9;
std::vector<float> argmax_row(test::random_tensors& rng, std::int64_t cols, int kind) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  auto row = tied_logits(rng, static_cast<std::size_t>(cols));
  const auto at = [&row](std::int64_t i) -> float& { return row[static_cast<std::size_t>(i)]; };
  const auto piece = [cols](std::int64_t k) { return piece_start(cols, k); };
  const auto last = cols - 1;
  if (kind == 4 || kind == 7 || kind == 8)
    std::fill(row.begin(), row.end(), -inf);
  switch (kind) {
    case 1:  // ties across pieces: the lowest id, the last of piece 2, wins
      for (const std::int64_t i : {piece(7), piece(5) + 3, piece(3), piece(3) - 1})
        at(std::clamp<std::int64_t>(i, 0, last)) = 9.0F;
      break;
    case 2:
      at(piece(1)) = 9.0F;
      at(last) = std::numeric_limits<float>::quiet_NaN();
      break;
    case 3:
      at(std::min(last, piece(7) + 1)) = inf;
      break;
    case 5:
      at(last) = 9.0F;
      break;
    case 6:
      at(0) = 9.0F;
      at(last) = 9.0F;
      break;
    case 7:
      at(piece(6)) = -0.0F;
      at(std::min(last, piece(1) + 1)) = 0.0F;
      break;
    case 8:
      at(piece(7)) = -5.0F;
      break;
    default:  // 0: tied_logits alone; 4: every entry -inf
      break;
  }
  return row;
}

TEST(gpu_sampling, argmax_over_clusters_and_single_blocks_matches_the_cpu_in_every_layout) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(604);
  // Fewer than 96 rows take a cluster of 8 blocks a row (70 included), 100 a
  // block a row.
  for (const std::int64_t rows : {1, 3, 10, 70, 100}) {
    for (const std::int64_t cols : {131072, 4099, 1000, 7, 1}) {
      std::vector<float> logical;  // [rows, cols], packed
      for (std::int64_t r = 0; r < rows; ++r) {
        // Shifted by `rows`, so one and three rows take other kinds than row 0's.
        const auto row = argmax_row(rng, cols, static_cast<int>((r + rows) % argmax_row_kinds));
        logical.insert(logical.end(), row.begin(), row.end());
      }
      const auto ref = cpu_samples(logical, cols, greedy_settings(rows));
      if (cols == 131072 && rows == 1) {
        EXPECT_EQ(ref[0], 3 * 16384 - 1);  // kind 1: the tie crosses pieces as meant
      }
      for (const auto& l : argmax_layouts(rows, cols)) {
        // Entries outside the matrix are NaN: a read of one turns its row to -1.
        std::vector<float> buffer(static_cast<std::size_t>(l.size),
                                  std::numeric_limits<float>::quiet_NaN());
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c) {
            buffer[static_cast<std::size_t>(l.offset + r * l.row_stride + c * l.col_stride)] =
                logical[static_cast<std::size_t>(r * cols + c)];
          }
        }
        const auto d_buffer = upload(buffer);
        auto d_out = poisoned<std::int32_t>(static_cast<std::size_t>(rows), 0x7f);
        const view<const float, 2> v{
            d_buffer.data() + l.offset, {rows, cols}, {l.row_stride, l.col_stride}};
        ASSERT_EQ(cuda::argmax(v, d_out.data(), nullptr), cudaSuccess);
        EXPECT_EQ(d_out.download(), ref) << rows << " x " << cols << ", " << l.name;
      }
    }
  }
}

TEST(gpu_sampling, sampled_tokens_match_the_cpu_for_every_setting_seed_and_counter) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(602);
  const std::int64_t vocab = 3001;
  const float temperatures[] = {0.5F, 1.0F, 3.0F};
  const std::int32_t top_ks[] = {0, 1, 7, 200, 5000};
  const float top_ps[] = {1.0F, 0.9F, 0.3F};
  settings s;
  for (const float t : temperatures) {
    for (const std::int32_t k : top_ks) {
      for (const float p : top_ps) {
        for (int draw = 0; draw < 6; ++draw) {
          s.temperature.push_back(t);
          s.top_k.push_back(k);
          s.top_p.push_back(p);
          s.seed.push_back(rng.engine()());
          s.counter.push_back(static_cast<std::uint64_t>(draw));
        }
      }
    }
  }
  const auto rows = s.seed.size();
  // Half the rows smooth random logits, half tie-heavy with masked entries.
  std::vector<float> logits;
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = r % 2 == 0 ? rng.floats(static_cast<std::size_t>(vocab), -4.0F, 4.0F)
                                : tied_logits(rng, static_cast<std::size_t>(vocab));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const auto ref = cpu_samples(logits, vocab, s);
  const auto got = gpu_samples(logits, vocab, s);
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[r], ref[r]) << "row " << r << ": temperature " << s.temperature[r] << " top_k "
                              << s.top_k[r] << " top_p " << s.top_p[r] << " seed " << s.seed[r]
                              << " counter " << s.counter[r];
  }
}

TEST(gpu_sampling, settings_outside_their_domain_give_minus_one_like_the_cpu_error) {
  MSTAR_REQUIRE_GPU();
  auto rng = test::gpu::seeded(603);
  const std::int64_t vocab = 100;
  const settings s{{-1.0F, 1.0F, 1.0F, 1.0F, std::numeric_limits<float>::infinity()},
                   {0, -2, 0, 0, 0},
                   {1.0F, 1.0F, 0.0F, 1.5F, 1.0F},
                   {1, 2, 3, 4, 5},
                   {0, 0, 0, 0, 0}};
  const auto logits = rng.floats(static_cast<std::size_t>(5 * vocab));
  const auto ref = cpu_samples(logits, vocab, s);
  EXPECT_EQ(ref, (std::vector<std::int32_t>(5, -1)));
  EXPECT_EQ(gpu_samples(logits, vocab, s), ref);
}

// upload_plan (the plan kernel) against what the copy-engine upload and
// loopback_ids leave: the plan as it is in host memory, the ids region's
// loopback sentinels (-2 - row) replaced by the previous draws, a -1 id
// and every int outside the ids kept, at aligned and unaligned ends and
// over more ints than one block's pass; plans that fit inlined in the
// launch's parameters (the same plan read there, the pinned copy
// poisoned) the same way.
TEST(gpu_sampling, the_plan_kernel_copies_the_plan_and_loops_back_the_draws) {
  MSTAR_REQUIRE_GPU();
  const std::vector<std::int32_t> drawn_host{70, 71, -1, 73};
  const auto drawn = upload(drawn_host);
  for (const std::int64_t n : {std::int64_t{9}, cuda::plan_inline_capacity, std::int64_t{4099}}) {
    for (const int form : {0, 1, 2, 3}) {
      const std::int64_t offset = form % 2;
      const bool inlined = form >= 2;
      if (inlined && n > cuda::plan_inline_capacity)
        continue;
      SCOPED_TRACE("n " + std::to_string(n) + ", offset " + std::to_string(offset) +
                   (inlined ? ", inlined" : ""));
      auto pinned = cuda::pinned_buffer::make(static_cast<std::size_t>(n + 1) * 4);
      ASSERT_TRUE(pinned.has_value());
      auto* hp = pinned->as<std::int32_t>() + offset;
      std::vector<std::int32_t> want(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i)
        hp[i] = want[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 7 - 5);
      // ids at [1, 6): three loopback rows (one drawing -1), a kept -1, a plain id.
      const std::int64_t ids_begin = 1;
      const std::int64_t ids_end = 6;
      hp[1] = -2 - 3;
      want[1] = 73;
      hp[2] = -2 - 0;
      want[2] = 70;
      hp[3] = want[3] = -1;
      hp[4] = -2 - 2;
      want[4] = -1;
      hp[5] = want[5] = 11;
      // Below -1 outside the ids (the rest of the plan) stays as it is.
      hp[0] = want[0] = -4;
      hp[n - 1] = want[static_cast<std::size_t>(n - 1)] = -3;
      void* mapped = nullptr;
      ASSERT_EQ(cudaHostGetDevicePointer(&mapped, hp, 0), cudaSuccess);
      auto out = poisoned<std::int32_t>(static_cast<std::size_t>(n) + 1, 0x7f);
      cuda::plan_upload_params p{
          out.data() + offset, static_cast<const std::int32_t*>(mapped),    n, ids_begin, ids_end,
          drawn.data(),        static_cast<std::int64_t>(drawn_host.size())};
      if (inlined) {
        p.inlined = true;
        std::copy(hp, hp + n, p.inline_plan);
        std::fill(hp, hp + n, -7);  // what the kernel must not read
        p.src = nullptr;
      }
      ASSERT_EQ(cuda::upload_plan(p, nullptr), cudaSuccess);
      const auto got = out.download();
      const std::vector<std::int32_t> part(got.begin() + offset, got.begin() + offset + n);
      EXPECT_EQ(part, want);
      const auto past = static_cast<std::size_t>(offset == 0 ? n : 0);
      std::int32_t poison = 0;
      std::memset(&poison, 0x7f, sizeof poison);
      EXPECT_EQ(got[past], poison) << "an int outside the plan was written";
    }
  }
  // Operands that name no plan or a bad id range are refused, nothing launched.
  cuda::plan_upload_params bad{};
  bad.n = 4;
  EXPECT_EQ(cuda::upload_plan(bad, nullptr), cudaErrorInvalidValue);
  std::int32_t one = 0;
  const cuda::plan_upload_params range{&one, &one, 1, 0, 2, nullptr, 0};
  EXPECT_EQ(cuda::upload_plan(range, nullptr), cudaErrorInvalidValue);
  // An inlined plan longer than its room is refused.
  cuda::plan_upload_params long_inline{&one,    nullptr, cuda::plan_inline_capacity + 1, 0, 0,
                                       nullptr, 0};
  long_inline.inlined = true;
  EXPECT_EQ(cuda::upload_plan(long_inline, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace mstar::kernels
