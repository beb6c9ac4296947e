#pragma once

// The one-row GEMV's launch shapes (kernels/cuda/gemv.cu) and the rule that
// picks one for a product's shape. Plain constexpr C++ with no CUDA header:
// gemv.cu instantiates its kernels from the table and indexes with the
// helpers below (constexpr, so device code calls them), the CPU tests check
// the rule and walk the indexing on the host (tests/kernels/gemv_shape_test.cpp),
// and the bench names each entry's shape.

#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace mstar::kernels::cuda {

/// One launch shape of the GEMV. A warp owns `rows` output features, or
/// `split` warps share them: warp s of the `split` (s = warp % split within
/// the block) lane l takes the 16-byte pieces s * 32 + l, then every
/// `32 * split` pieces on (piece_stride), `unroll` of them a row in flight,
/// and the `split` partial sums meet in shared memory, added in the order
/// s = 0, 1, ... (the same bits run to run). `warps` warps a block.
struct gemv_shape {
  int rows = 1;    ///< output features a warp's dots cover
  int unroll = 4;  ///< pieces of each of those rows in flight a lane
  int split = 1;   ///< warps that share one feature's K (1: a warp takes all of it)
  int warps = 8;   ///< warps a block (`warps % split == 0`)

  [[nodiscard]] constexpr int threads() const { return warps * 32; }
  /// Output features a block covers.
  [[nodiscard]] constexpr int features_per_block() const { return warps / split * rows; }
  /// Pieces between one piece of a lane and its next.
  [[nodiscard]] constexpr int piece_stride() const { return 32 * split; }
  /// The first feature of warp `warp` (0 .. warps - 1) of block `block`
  /// (features fit an int: the GEMV takes n <= 2^30).
  [[nodiscard]] constexpr int first_feature(int block, int warp) const {
    return (block * (warps / split) + warp / split) * rows;
  }
  /// The first piece lane `lane` of warp `warp` of a block takes.
  [[nodiscard]] constexpr int first_piece(int warp, int lane) const {
    return warp % split * 32 + lane;
  }
  /// Blocks a launch over `n` output features takes.
  [[nodiscard]] constexpr std::int64_t blocks(std::int64_t n) const {
    return (n + features_per_block() - 1) / features_per_block();
  }
};

/// The table; entries never change meaning, so sweeps stay comparable
/// (`MSTAR_GEMV_VARIANT`, linear_bf16_params::gemv_variant). Entries 0-5
/// (split 1, 8 warps) each walk a feature's K in one lane order, so they
/// give the same bits; entries 6-11 split K (their partial sums add in
/// another order: the same bits as each other only at the same split) and
/// are for narrow products, whose entry-5 grid leaves the SMs half empty
/// (gemv_narrow). Measured shapes (H200) are in gemv.cu.
inline constexpr gemv_shape gemv_shapes[] = {
    {2, 8, 1, 8},   // 0: two features a warp, eight pieces each in flight (96 registers)
    {2, 4, 1, 8},   // 1: four pieces each
    {1, 8, 1, 8},   // 2: one feature a warp, eight pieces
    {4, 4, 1, 8},   // 3: four features a warp, four pieces each
    {4, 2, 1, 8},   // 4: four features a warp, two pieces each
    {1, 4, 1, 8},   // 5: one feature, four pieces (the default)
    {1, 4, 2, 16},  // 6: two warps a feature, 512 threads: entry 5's grid, twice the warps
    {1, 8, 2, 16},  // 7: as 6, eight pieces (a 4,096-wide row in flight at once)
    {1, 4, 4, 16},  // 8: four warps a feature, four features a block (twice 5's blocks)
    {1, 8, 4, 16},  // 9: as 8, eight pieces (an 8,192-wide row in flight at once)
    {1, 4, 8, 16},  // 10: eight warps a feature, two features a block
    {1, 4, 4, 8},   // 11: four warps a feature, 256 threads: two features a block
                    // Entry 12 (entry 4 capped to three blocks an SM, so that the 0.56B's
                    // in_proj fit one wave for the one-wave pick) was tried twice and
                    // removed: session 50's form spilled (565 us a step against 485); with
                    // the conv fold's one channel a lane (80 registers, no spill) it still
                    // lost 17 us (H100, session 52's call1: 497.2-498.4 us against
                    // 480.2-481.1, bench/results/session52-calls/).
};

/// Launch shapes of the one-row GEMV.
inline constexpr int gemv_variants = static_cast<int>(std::size(gemv_shapes));

/// The entry a wide product takes (measured best in the 0.56B model).
inline constexpr int gemv_default_variant = 5;

/// The entry a narrow product takes unless `MSTAR_GEMV_SPLIT` names another.
inline constexpr int gemv_split_variant = 6;

/// Blocks an SM below which the default entry's grid counts as narrow:
/// under two of its 256-thread blocks an SM, at most a quarter of an SM's
/// 64 warp slots stream (and hold bytes in flight). Measured on the H200
/// (session 36, fourth call; batch-1 steps, entry 6 for narrow products):
/// the 0.56B Nemotron-H (N 2,048: 256 blocks) 0.4382 / 0.4400 ms against
/// 0.4512 / 0.4491 with the rule off; the 8B shape (N 4,096: 512 blocks,
/// under the four an SM first tried) 4.905 against 4.743 ms, so products
/// of two blocks an SM and more keep entry 5.
inline constexpr int gemv_narrow_blocks_per_sm = 2;

/// Whether an [n, k] product is narrow on a device of `num_sms`
/// multiprocessors: the default entry's grid is under
/// gemv_narrow_blocks_per_sm blocks an SM, and K gives every lane of the
/// split entry's warps a piece (k / 8 >= 32 * split).
[[nodiscard]] constexpr bool gemv_narrow(std::int64_t n, std::int64_t k, int num_sms,
                                         int split_variant = gemv_split_variant) {
  const gemv_shape wide = gemv_shapes[gemv_default_variant];
  const gemv_shape split = gemv_shapes[split_variant];
  return wide.blocks(n) < std::int64_t{gemv_narrow_blocks_per_sm} * num_sms &&
         k / 8 >= split.piece_stride();
}

/// The entry a launch takes: `requested` (params' gemv_variant) when in the
/// table, else `forced` (MSTAR_GEMV_VARIANT) when in it, else
/// `split_variant` where it names a split entry (-1: the rule is off,
/// MSTAR_GEMV_SPLIT=0) and the product is narrow, else the default. A
/// function of the product's shape alone, so the folded forms and the plain
/// GEMV after a separate norm take the same entry (the same bits).
[[nodiscard]] constexpr int gemv_pick(int requested, int forced, int split_variant, std::int64_t n,
                                      std::int64_t k, int num_sms) {
  const auto in_table = [](int v) { return v >= 0 && v < gemv_variants; };
  if (in_table(requested))
    return requested;
  if (in_table(forced))
    return forced;
  if (in_table(split_variant) && gemv_shapes[split_variant].split > 1 &&
      gemv_narrow(n, k, num_sms, split_variant))
    return split_variant;
  return gemv_default_variant;
}

/// The one-wave pick (gemv.cu, chain mode `wave`; session 50): K above
/// which a product keeps the rule's entry (the 8B shape, K 4,096, lost 31
/// us a step with it on an H100).
inline constexpr std::int64_t gemv_wave_pick_max_k = 2048;

/// The one-wave pick's list when MSTAR_GEMV_WAVE_PICK is unset, empty or
/// not a list (`gemv_wave_pick_list`): entry 4.
inline constexpr int gemv_wave_pick_default = 4;

/// MSTAR_GEMV_WAVE_PICK's text as the pick's list: `none` is the empty list
/// (the pick off); otherwise comma-separated table entries of the
/// one-feature walk (split 1: 0-5), tried in that order. Anything else
/// (an empty text or item, a split entry, a number outside the table,
/// spaces, other separators) is no list: nullopt.
[[nodiscard]] inline std::optional<std::vector<int>> gemv_wave_pick_list(std::string_view text) {
  if (text == "none")
    return std::vector<int>{};
  std::vector<int> order;
  for (;;) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    int v = -1;
    const char* const last = item.data() + item.size();
    const auto [end, ec] = std::from_chars(item.data(), last, v);
    if (ec != std::errc{} || end != last || v < 0 || v >= gemv_variants ||
        gemv_shapes[v].split != 1)
      return std::nullopt;
    order.push_back(v);
    if (comma == std::string_view::npos)
      return order;
    text.remove_prefix(comma + 1);
  }
}

/// The one-wave pick: the entry a chained launch takes whose entry the rule
/// picked (`entry`, gemv_pick's with no request and no forced entry), given
/// `one_wave(e)`, whether entry e's grid is resident at once for this
/// launch. `entry` itself where it is a split entry, K is above
/// gemv_wave_pick_max_k or its grid is one wave already; otherwise the first
/// entry of `order` whose grid is one wave, else `entry`. Every entry it
/// can return walks a feature's K in one lane order: the same bits.
template <class OneWave>
[[nodiscard]] int gemv_wave_pick(int entry, std::int64_t k, const std::vector<int>& order,
                                 OneWave&& one_wave) {
  if (gemv_shapes[entry].split != 1 || k > gemv_wave_pick_max_k || order.empty() || one_wave(entry))
    return entry;
  for (const int e : order) {
    if (gemv_shapes[e].split == 1 && one_wave(e))
      return e;
  }
  return entry;
}

}  // namespace mstar::kernels::cuda
