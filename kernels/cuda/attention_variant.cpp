// The walk and merge of the fast paged-attention kernels, and the prefill
// kernel: a process-wide override (tests, benches), then the environment,
// then the default rule.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/internal/attend_variant.hpp"

namespace mstar::kernels::cuda {
namespace {

std::atomic<attention_walk> walk_override{attention_walk::automatic};
std::atomic<attention_merge> merge_override{attention_merge::automatic};
std::atomic<attention_prefill> prefill_override{attention_prefill::automatic};
std::atomic<int> single_direct_override{-1};
std::atomic<int> mma_bulk_override{-1};

// An on / off switch: its override where set (0 or 1; -1 unset), else
// `env`, the environment's choice the caller read once.
bool switch_on(const std::atomic<int>& forced, bool env) {
  const int f = forced.load(std::memory_order_relaxed);
  return f >= 0 ? f == 1 : env;
}

// Sets a switch's override (1 on for any positive value, 0 off, -1 for any
// negative one); returns the one it replaces.
int set_switch(std::atomic<int>& forced, int on) {
  return forced.exchange(on < 0 ? -1 : (on != 0 ? 1 : 0));
}

// `name`'s value as 0 .. count - 1, else -1 (unset or not a choice).
int env_choice(const char* name, int count) {
  const char* e = std::getenv(name);
  if (e == nullptr || e[0] < '0' || e[0] >= '0' + count || e[1] != '\0')
    return -1;
  return e[0] - '0';
}

attention_walk env_walk() {
  static const auto w = static_cast<attention_walk>(env_choice("MSTAR_ATTN_DECODE_WALK", 6));
  return w;
}

attention_merge env_merge() {
  static const auto m = static_cast<attention_merge>(env_choice("MSTAR_ATTN_SPLIT_MERGE", 3));
  return m;
}

// MSTAR_ATTN_PREFILL: "mma", "wgmma", "wgmma_serial" or "wgmma_lean";
// anything else is automatic.
attention_prefill env_prefill() {
  static const attention_prefill k = [] {
    const char* e = std::getenv("MSTAR_ATTN_PREFILL");
    if (e != nullptr && std::strcmp(e, "wgmma") == 0)
      return attention_prefill::wgmma;
    if (e != nullptr && std::strcmp(e, "wgmma_serial") == 0)
      return attention_prefill::wgmma_serial;
    if (e != nullptr && std::strcmp(e, "wgmma_lean") == 0)
      return attention_prefill::wgmma_lean;
    if (e != nullptr && std::strcmp(e, "mma") == 0)
      return attention_prefill::mma;
    return attention_prefill::automatic;
  }();
  return k;
}

// The default walk: the whole-token-row walk on tensor cores (rows_mma,
// attention_decode_rows_mma.cu) for decode steps of 16 rows and more, the
// tensor-core walk (mma, attention_decode_mma.cu) below, each split by its
// own rule (attention_split.cu). H200, bf16 pages, 32 q / 8 kv heads, D
// 128, 2,048 positions a row, CUDA graphs, us a call (session 36, second
// call, the split minimums swept): mma split into 128-position chunks 9.4
// at one row and 18.0-18.3 at four (registers, 32-position chunks, the
// default before: 12.0 / 25.2); rows_mma in 128-position chunks 45.2 at 16
// rows (50.1 in 16-position ones). Session 35, fourth call, at 64 / 256
// rows (no split there): rows_mma 149.9 / 523.7, rows (CUDA cores, 2 x 48
// KiB ring) 173.7 / 595.7, registers 188.8 / 726.3. Where a walk does not
// take a step (head_dim 256 for rows_mma, groups past 64, f32 arenas)
// walk_of falls back to registers. The 4-stage pipeline lost in every case
// that isolates it: one pass 107.7 -> 113.5 (1 row), 113.1 -> 115.0 (16),
// 188.8 -> 217.5 (64), 728 -> 845 (256); split at 1 row went 32.5 -> 13.5
// with the block merge too: 64 partials a row, which the warp merge reads
// one round trip per partial. bench/h200_decode_attention.sh times every
// walk and merge from 1 to 256 rows.
// Since session 58 walk_of gives rows_mma's steps to the mma walk where
// its bulk copies take the shape (decode_mma_bulk_fits; not with
// MSTAR_ATTN_MMA_BULK=0): H100, the shape above, us a call, mma / rows_mma
// (session 58's call3, two rounds): 16 rows 55.8-56.0 / 58.5, 32 rows 97.8
// / 103.0, 64 rows 186.2-186.5 / 192.3-192.5; FlashInfer 0.2.5 56.4 at 16
// rows in the same call. rows_mma does not take head_dim 256, which fell
// back to registers before.
attention_walk default_walk(bool split, bool decode, std::int64_t rows) {
  static_cast<void>(split);
  if (!decode)
    return attention_walk::registers;
  return rows >= 16 ? attention_walk::rows_mma : attention_walk::mma;
}

}  // namespace

namespace detail {

bool walk_by_rule() {
  return walk_override.load(std::memory_order_relaxed) == attention_walk::automatic &&
         env_walk() == attention_walk::automatic;
}

attention_walk walk_for(bool split, bool decode, std::int64_t rows) {
  if (const auto w = walk_override.load(std::memory_order_relaxed); w != attention_walk::automatic)
    return w;
  if (const auto w = env_walk(); w != attention_walk::automatic)
    return w;
  return default_walk(split, decode, rows);
}

bool decode_mma_takes(const paged_attention_params& p) {
  const kv_geometry& g = p.arena.geometry;
  const auto aligned = [](const void* ptr, std::uintptr_t to) {
    return reinterpret_cast<std::uintptr_t>(ptr) % to == 0;
  };
  return p.table.is_decode() && g.dtype == mstar::dtype::bfloat16 &&
         (g.head_dim == 64 || g.head_dim == 128 || g.head_dim == 256) && g.num_kv_heads > 0 &&
         p.num_qo_heads > 0 && p.num_qo_heads % g.num_kv_heads == 0 && aligned(p.arena.base, 16) &&
         aligned(p.q, 8);
}

bool decode_rows_takes(const paged_attention_params& p) {
  const kv_geometry& g = p.arena.geometry;
  decode_rows_shape shape;
  return p.table.is_decode() && g.dtype == mstar::dtype::bfloat16 && g.num_kv_heads > 0 &&
         p.num_qo_heads > 0 && p.num_qo_heads % g.num_kv_heads == 0 &&
         reinterpret_cast<std::uintptr_t>(p.arena.base) % 16 == 0 &&
         decode_rows_shape_of(g.num_kv_heads, p.num_qo_heads / g.num_kv_heads, g.head_dim, shape);
}

bool decode_rows_mma_takes(const paged_attention_params& p) {
  const kv_geometry& g = p.arena.geometry;
  decode_rows_shape shape;
  return p.table.is_decode() && g.dtype == mstar::dtype::bfloat16 && g.num_kv_heads > 0 &&
         p.num_qo_heads > 0 && p.num_qo_heads % g.num_kv_heads == 0 &&
         reinterpret_cast<std::uintptr_t>(p.arena.base) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(p.q) % 8 == 0 &&
         decode_rows_mma_shape_of(g.num_kv_heads, p.num_qo_heads / g.num_kv_heads, g.head_dim,
                                  shape);
}

attention_walk walk_of(const paged_attention_params& p, bool split) {
  attention_walk w = walk_for(split, p.table.is_decode(), p.table.num_rows());
  // The default rule's rows_mma steps go to the mma walk where its bulk
  // copies take the shape and are not turned off (default_walk's note).
  const kv_geometry& g = p.arena.geometry;
  if (w == attention_walk::rows_mma && walk_by_rule() && mma_bulk_choice() != 0 &&
      decode_mma_takes(p) && decode_mma_bulk_fits(g.head_dim, p.num_qo_heads / g.num_kv_heads))
    w = attention_walk::mma;
  if (w == attention_walk::mma && !decode_mma_takes(p))
    return attention_walk::registers;
  if (w == attention_walk::rows && !decode_rows_takes(p))
    return attention_walk::registers;
  if (w == attention_walk::rows_mma && !decode_rows_mma_takes(p))
    return attention_walk::registers;
  return w;
}

attention_prefill prefill_for() {
  if (const auto k = prefill_override.load(std::memory_order_relaxed);
      k != attention_prefill::automatic)
    return k;
  if (const auto k = env_prefill(); k != attention_prefill::automatic)
    return k;
  // The lean-consumer warpgroup-MMA kernel where it takes the step (sm_90a,
  // head_dim 64 / 128; paged_attention_prefill falls back to wgmma, then
  // mma): H200, 2,048-token causal rows, 32 q / 8 kv heads, D 128, us a
  // call (2026-12-04, bench/h200_prefill_lean.sh): 114.5 against wgmma's
  // 147.2 at one row, 896.8 against 1151.8 at eight, every prefill test
  // passing on it (wgmma against mma.sync's, session 35: 147.0 / 163.1 and
  // 1144.8 / 1289.0).
  return attention_prefill::wgmma_lean;
}

int split_min_chunk_override() {
  static const int n = [] {
    const char* e = std::getenv("MSTAR_ATTN_SPLIT_MIN_CHUNK");
    const long v = e != nullptr ? std::strtol(e, nullptr, 10) : 0;
    return v > 0 && v <= 1 << 20 ? static_cast<int>(v) : 0;
  }();
  return n;
}

bool single_direct_enabled() {
  static const bool on = env_choice("MSTAR_ATTN_SINGLE_DIRECT", 2) != 0;  // on unless 0
  return switch_on(single_direct_override, on);
}

int mma_bulk_choice() {
  if (const int f = mma_bulk_override.load(std::memory_order_relaxed); f >= 0)
    return f;
  static const int env = env_choice("MSTAR_ATTN_MMA_BULK", 2);  // -1 unset: by grid
  return env;
}

int split_count_override() {
  static const int n = [] {
    const char* e = std::getenv("MSTAR_ATTN_SPLITS");
    const long v = e != nullptr ? std::strtol(e, nullptr, 10) : 0;
    return v > 0 && v <= max_split_override ? static_cast<int>(v) : 0;
  }();
  return n;
}

attention_merge merge_for(attention_walk walk) {
  if (const auto m = merge_override.load(std::memory_order_relaxed);
      m != attention_merge::automatic)
    return m;
  if (const auto m = env_merge(); m != attention_merge::automatic)
    return m;
  // The fused merge where it won on an H200 (bench/h200_split_merge.sh,
  // 2026-12-04: 2,048 positions, 32 q / 8 kv heads, D 128, graphs, us a call,
  // block / fused): the mma walk at 4 rows 18.52 / 17.72 and 8 rows 34.77 /
  // 34.05; it lost on rows_mma at 16 and 32 rows (46.21 / 50.09, 84.04 /
  // 88.73). At one row it lost alone (9.87 / 11.35, 16 splits of one item)
  // but wins in a model's step, where the merge kernel is a launch of its
  // own on the chain and, since one-chunk rows are written directly under
  // the fused merge too, steps to 128 positions run no merge at all: the
  // 0.56B at batch 1 478.1-478.7 us against 480.3-481.1 (H100, session 52's
  // call2, two rounds).
  if (walk == attention_walk::mma)
    return attention_merge::fused;
  return attention_merge::block;
}

}  // namespace detail

attention_variant set_attention_variant(attention_variant v) {
  return {walk_override.exchange(v.walk), merge_override.exchange(v.merge)};
}

attention_variant paged_attention_variant(const paged_attention_params& p, bool split) {
  const attention_walk walk = detail::walk_of(p, split);
  const attention_walk split_walk = detail::walk_of(p, true);
  attention_merge merge = detail::merge_for(split_walk);
  if (merge == attention_merge::fused && !detail::fused_merge_takes(p, split_walk))
    merge = attention_merge::block;
  return {walk, merge};
}

int set_attention_single_direct(int on) {
  return set_switch(single_direct_override, on);
}

int set_attention_mma_bulk(int on) {
  return set_switch(mma_bulk_override, on);
}

attention_prefill set_attention_prefill(attention_prefill k) {
  return prefill_override.exchange(k);
}

attention_prefill paged_attention_prefill(const paged_attention_params& p) {
  const attention_prefill k = detail::prefill_for();
  if (k == attention_prefill::mma || !detail::prefill_wgmma_takes(p))
    return attention_prefill::mma;
  if (k == attention_prefill::wgmma_lean && !detail::prefill_wgmma_lean_takes(p))
    return attention_prefill::wgmma;
  return k;
}

const char* to_string(attention_prefill k) {
  switch (k) {
    case attention_prefill::automatic:
      return "auto";
    case attention_prefill::mma:
      return "mma";
    case attention_prefill::wgmma:
      return "wgmma";
    case attention_prefill::wgmma_serial:
      return "wgmma_serial";
    case attention_prefill::wgmma_lean:
      return "wgmma_lean";
  }
  return "?";
}

const char* to_string(attention_walk w) {
  switch (w) {
    case attention_walk::automatic:
      return "auto";
    case attention_walk::registers:
      return "regs";
    case attention_walk::pipeline4:
      return "cp4";
    case attention_walk::pipeline2:
      return "cp2";
    case attention_walk::mma:
      return "mma";
    case attention_walk::rows:
      return "rows";
    case attention_walk::rows_mma:
      return "rows_mma";
  }
  return "?";
}

const char* to_string(attention_merge m) {
  switch (m) {
    case attention_merge::automatic:
      return "auto";
    case attention_merge::warp:
      return "mwarp";
    case attention_merge::block:
      return "mblock";
    case attention_merge::fused:
      return "mfused";
  }
  return "?";
}

}  // namespace mstar::kernels::cuda
