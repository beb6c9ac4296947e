// The one-row GEMV's launch shapes and default rule (kernels/cuda/gemv_shape.hpp)
// on the host: the table's fixed entries, the kernel's piece walk (the loop
// of gemv.cu's gemv_bf16_kernel, transliterated over every block, warp and
// lane) covering each feature's pieces exactly once with the tails the split
// shapes cut unevenly, and which entry the rule takes by shape and SM count.
#include "kernels/cuda/gemv_shape.hpp"

#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <vector>

namespace mstar::kernels::cuda {
namespace {

TEST(gemv_shape, entries_zero_to_five_keep_their_shapes_and_every_entry_launches) {
  // Sweeps compare entries across sessions: 0-5 are session 29's and 32's.
  constexpr int fixed[][2] = {{2, 8}, {2, 4}, {1, 8}, {4, 4}, {4, 2}, {1, 4}};
  for (int v = 0; v < 6; ++v) {
    SCOPED_TRACE(v);
    EXPECT_EQ(gemv_shapes[v].rows, fixed[v][0]);
    EXPECT_EQ(gemv_shapes[v].unroll, fixed[v][1]);
    EXPECT_EQ(gemv_shapes[v].split, 1);
    EXPECT_EQ(gemv_shapes[v].warps, 8);
  }
  for (const auto& s : gemv_shapes) {
    EXPECT_EQ(s.warps % s.split, 0);
    EXPECT_GE(s.threads(), 256);  // the RMS form sums over add_rms_norm's 256 threads
    EXPECT_LE(s.threads(), 1024);
    EXPECT_GE(s.features_per_block(), 1);
  }
  EXPECT_EQ(gemv_shapes[gemv_default_variant].split, 1);
  EXPECT_GT(gemv_shapes[gemv_split_variant].split, 1);
}

// What one launch of `s` over [n, k] does with each (feature, piece): the
// kernel's loop for every lane of every warp of every block, counting the
// dots each (feature, piece) gets, checking each batch uses exactly the
// pieces it loaded, and counting the outputs each feature gets (lane 0 of a
// group's warp 0). Returns the first failure, or "" when every piece of
// every feature was dotted exactly once and every feature written once.
std::string walk_gemv(const gemv_shape& s, int n, int k) {
  const int pieces = k / 8;
  std::vector<int> dots(static_cast<std::size_t>(n) * static_cast<std::size_t>(pieces));
  std::vector<int> writes(static_cast<std::size_t>(n));
  const int stride = s.piece_stride();
  const auto blocks = static_cast<int>(s.blocks(n));
  for (int block = 0; block < blocks; ++block) {
    for (int warp = 0; warp < s.warps; ++warp) {
      const int n0 = s.first_feature(block, warp);
      const bool active = n0 < n;
      for (int lane = 0; lane < 32; ++lane) {
        const int first = s.first_piece(warp, lane);
        // The pieces a batch loads (load(p0): those under `pieces`).
        const auto loaded = [&](int p0) {
          std::vector<int> out;
          for (int u = 0; u < s.unroll; ++u) {
            if (p0 + stride * u < pieces)
              out.push_back(p0 + stride * u);
          }
          return out;
        };
        std::vector<int> in_flight = active ? loaded(first) : std::vector<int>{};
        for (int p0 = first; active;) {
          std::vector<int> used;
          for (int u = 0; u < s.unroll; ++u) {
            const int p = p0 + stride * u;
            if (p >= pieces)
              break;
            used.push_back(p);
            for (int r = 0; r < s.rows; ++r) {
              if (n0 + r < n)  // a missing row's dots go nowhere
                ++dots[static_cast<std::size_t>(n0 + r) * pieces + p];
            }
          }
          if (used != in_flight)
            return "block " + std::to_string(block) + " warp " + std::to_string(warp) + " lane " +
                   std::to_string(lane) + ": a batch used other pieces than it loaded";
          p0 += stride * s.unroll;
          if (p0 >= pieces)
            break;
          in_flight = loaded(p0);
        }
      }
      if (active && warp % s.split == 0) {  // lane 0 of the group's warp 0
        for (int r = 0; r < s.rows && n0 + r < n; ++r)
          ++writes[static_cast<std::size_t>(n0 + r)];
      }
    }
  }
  for (int f = 0; f < n; ++f) {
    if (writes[static_cast<std::size_t>(f)] != 1)
      return "feature " + std::to_string(f) + " written " +
             std::to_string(writes[static_cast<std::size_t>(f)]) + " times";
    for (int p = 0; p < pieces; ++p) {
      const int d = dots[static_cast<std::size_t>(f) * pieces + p];
      if (d != 1)
        return "feature " + std::to_string(f) + " piece " + std::to_string(p) + " dotted " +
               std::to_string(d) + " times";
    }
  }
  return "";
}

TEST(gemv_shape, every_entry_dots_each_piece_of_each_feature_once_whatever_the_tails) {
  // K 8 (one piece), pieces one over and one under a split's stride and a
  // whole batch, N under one block, odd, and one over a block's features.
  constexpr int ks[] = {8, 16, 248, 256, 264, 1032, 2048, 4104, 8200};
  constexpr int ns[] = {1, 2, 3, 7, 9, 17, 33, 130};
  for (int v = 0; v < gemv_variants; ++v) {
    for (const int k : ks) {
      for (const int n : ns) {
        SCOPED_TRACE("entry " + std::to_string(v) + " k " + std::to_string(k) + " n " +
                     std::to_string(n));
        EXPECT_EQ(walk_gemv(gemv_shapes[v], n, k), "");
      }
    }
  }
}

TEST(gemv_shape, narrow_products_take_the_split_entry_on_the_h200s_132_sms) {
  constexpr int sms = 132;
  // The 0.56B Nemotron-H's narrow products (entry 5: 256 blocks, under 2 x
  // 132), then the 8B's (512 blocks, where the split lost) and the wide ones.
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 2048, 4096, sms), gemv_split_variant);
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 2048, 8192, sms), gemv_split_variant);
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 4096, 21504, sms), gemv_default_variant);
  for (const std::int64_t n : {8192, 10304, 18560, 32000}) {
    EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, n, 2048, sms), gemv_default_variant) << n;
  }
  // The edge is the default grid's blocks, not N: 263 blocks narrow, 264 not.
  EXPECT_TRUE(gemv_narrow(263 * 8, 4096, sms));
  EXPECT_FALSE(gemv_narrow(264 * 8, 4096, sms));
  // The same N on a device of 16 SMs fills it.
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 2048, 4096, 16), gemv_default_variant);
  // K too short to give each lane of the split warps a piece.
  const int stride = gemv_shapes[gemv_split_variant].piece_stride();
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 2048, 8 * stride - 8, sms), gemv_default_variant);
  EXPECT_EQ(gemv_pick(-1, -1, gemv_split_variant, 2048, 8 * stride, sms), gemv_split_variant);
}

TEST(gemv_shape, a_requested_or_forced_entry_wins_and_the_rule_can_be_turned_off_or_redirected) {
  constexpr int sms = 132;
  EXPECT_EQ(gemv_pick(3, -1, gemv_split_variant, 2048, 4096, sms), 3);
  EXPECT_EQ(gemv_pick(3, 9, gemv_split_variant, 2048, 4096, sms), 3);
  EXPECT_EQ(gemv_pick(-1, 2, gemv_split_variant, 2048, 4096, sms), 2);
  EXPECT_EQ(gemv_pick(gemv_variants, 2, gemv_split_variant, 2048, 4096, sms), 2);
  EXPECT_EQ(gemv_pick(-1, gemv_variants, gemv_split_variant, 2048, 4096, sms), gemv_split_variant);
  // MSTAR_GEMV_SPLIT=0 (-1 here): entry 5 for every shape.
  EXPECT_EQ(gemv_pick(-1, -1, -1, 2048, 4096, sms), gemv_default_variant);
  // Another split entry for narrow products; an entry that does not split
  // is no split entry, so the rule is then off.
  for (int v = 0; v < gemv_variants; ++v) {
    const int want = gemv_shapes[v].split > 1 ? v : gemv_default_variant;
    EXPECT_EQ(gemv_pick(-1, -1, v, 2048, 8192, sms), want) << v;
    EXPECT_EQ(gemv_pick(-1, -1, v, 8192, 2048, sms), gemv_default_variant) << v;
  }
}

TEST(gemv_shape, the_one_wave_pick_list_takes_entries_of_the_one_feature_walk_or_none) {
  using list = std::vector<int>;
  EXPECT_EQ(gemv_wave_pick_list("4"), list{4});
  EXPECT_EQ(gemv_wave_pick_list("4,3"), (list{4, 3}));
  EXPECT_EQ(gemv_wave_pick_list("1,0,4,3"), (list{1, 0, 4, 3}));
  EXPECT_EQ(gemv_wave_pick_list("none"), list{});
  // Not a list: the caller keeps its default (entry 4).
  for (const char* bad :
       {"", "6", "11", "12", "-1", "4,", ",4", "4,,3", "4;3", " 4", "4 ", "x", "None", "4,6"}) {
    EXPECT_EQ(gemv_wave_pick_list(bad), std::nullopt) << '"' << bad << '"';
  }
}

TEST(gemv_shape, the_one_wave_pick_moves_only_multi_wave_one_feature_products_at_short_k) {
  const std::vector<int> order{4, 3};
  // The 0.56B's MLP up: entry 5 is more than one wave, entry 4 is one.
  const auto only4 = [](int e) { return e == 4; };
  EXPECT_EQ(gemv_wave_pick(5, 2048, order, only4), 4);
  // Entry 4 not one wave, the next listed is: that one.
  EXPECT_EQ(gemv_wave_pick(5, 2048, order, [](int e) { return e == 3; }), 3);
  // Nothing fits, or the list is empty: the rule's entry.
  const auto none = [](int) { return false; };
  EXPECT_EQ(gemv_wave_pick(5, 2048, order, none), 5);
  EXPECT_EQ(gemv_wave_pick(5, 2048, {}, only4), 5);
  // One wave already, K past the bound, or a split entry (narrow products): kept.
  EXPECT_EQ(gemv_wave_pick(5, 2048, order, [](int) { return true; }), 5);
  EXPECT_EQ(gemv_wave_pick(5, gemv_wave_pick_max_k + 8, order, only4), 5);
  EXPECT_EQ(gemv_wave_pick(gemv_split_variant, 2048, order, only4), gemv_split_variant);
  // Whatever it returns walks a feature's K in one lane order (the same
  // bits): a split entry in the list is passed over even where it would fit.
  for (int v = 0; v < gemv_variants; ++v) {
    if (gemv_shapes[v].split != 1)
      continue;
    const auto all_but_v = [v](int x) { return x != v; };
    const int other = v == 4 ? 3 : 4;
    EXPECT_EQ(gemv_wave_pick(v, 1024, {gemv_split_variant, 7, other}, all_but_v), other) << v;
    EXPECT_EQ(gemv_wave_pick(v, 1024, {gemv_split_variant}, all_but_v), v) << v;
  }
}

}  // namespace
}  // namespace mstar::kernels::cuda
