// The SSD decode step's launch shapes (kernels/cuda/recurrent.hpp): entry 0
// the block-per-(row, head) kernel of ssd.cu, entries 1 on the
// warp-a-state-row kernel of internal/ssd_update.cuh.
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include "kernels/cuda/internal/ssd_update.cuh"
#include "kernels/cuda/internal/ssd_update.hpp"
#include "kernels/cuda/recurrent.hpp"

namespace mstar::kernels::cuda {
namespace {

using detail::update_args;
using detail::update_shape;

// The rows kernel releases the next kernel once its state's loads are
// issued rather than at its start (MSTAR_SSD_RELEASE, read once: `start`
// for the release at the start, `sums` once its sums are done, `end` not
// at all; anything else, unset included, `loads`), so that the next
// kernel's weight loads (the out_proj's, before its own wait) queue behind
// the state's, which the step waits on, not ahead of them. Timing only:
// the same bits. H100, the 0.56B at batch 1 (session 51's call1, three
// rounds alternated): 478.2-480.1 us a step against 483.6-485.2 at the
// start, the same tokens. `sums` and `end` (session 60's call3: the
// update's reads on an HBM the out_proj's loads do not share): 472.2-472.7
// and 475.8-475.9 us against loads' 471.4-473.0 (bench/results/session60-calls/).
std::uint8_t update_release_point() {
  static const std::uint8_t point = [] {
    const char* e = std::getenv("MSTAR_SSD_RELEASE");
    const std::string_view v = e != nullptr ? e : "";
    return v == "start"  ? detail::release_at_start
           : v == "sums" ? detail::release_at_sums
           : v == "end"  ? detail::release_at_end
                         : detail::release_at_loads;
  }();
  return point;
}

// The rows kernel's arguments for `p`; false where entry 0 must take the
// step instead (checks the rows kernel does not make).
bool update_args_of(const ssd_update_params& p, update_args& a) {
  const auto& w = p.w;
  const bool valid =
      p.batch > 0 && p.batch <= 65535 && w.num_heads > 0 && w.head_dim > 0 && w.n_groups > 0 &&
      w.num_heads % w.n_groups == 0 && p.slot_indices.size() >= static_cast<std::size_t>(p.batch) &&
      (p.has_state.empty() || p.has_state.size() >= static_cast<std::size_t>(p.batch)) &&
      reinterpret_cast<std::uintptr_t>(p.state) % 16 == 0;
  if (!valid)
    return false;
  const std::int64_t bc_stride =
      p.in.bc_stride != 0 ? p.in.bc_stride : std::int64_t{w.n_groups} * w.state_size;
  const bool bc_vector = bc_stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(p.in.B) % 16 == 0 &&
                         reinterpret_cast<std::uintptr_t>(p.in.C) % 16 == 0;
  a = update_args{w.dt_bias,
                  w.A_log,
                  w.D,
                  w.num_heads,
                  w.head_dim,
                  w.state_size,
                  w.num_heads / w.n_groups,
                  w.dt_min,
                  w.dt_max,
                  p.in.x,
                  p.in.dt,
                  p.in.B,
                  p.in.C,
                  p.in.x_stride != 0 ? p.in.x_stride : std::int64_t{w.num_heads} * w.head_dim,
                  p.in.dt_stride != 0 ? p.in.dt_stride : w.num_heads,
                  bc_stride,
                  p.y,
                  p.state,
                  p.slot_indices.data(),
                  p.has_state.empty() ? nullptr : p.has_state.data(),
                  bc_vector,
                  p.state_settled,
                  update_release_point()};
  return true;
}

// Shape `S` where it takes the step (N 64 / 128, P a multiple of its rows a
// block, the checks of entry 0 passed), else entry 0, which also answers
// the shapes no entry takes.
template <update_shape S>
cudaError_t launch_shape(const ssd_update_params& p, cudaStream_t stream) {
  update_args a{};
  if (!update_args_of(p, a) || !detail::launch_update_shape<S>(a, p.batch, stream))
    return detail::launch_ssd_update_blocks(p, stream);
  return detail::launch_status();
}

// Its shapes: float4 a lane of each state row (1: a warp a row at N 128,
// half a warp at N 64), threads a block, state rows a thread, streaming
// hints (bit 0 loads, bit 1 stores), the register cap (it sets the warps
// an SM: four 16K-register files hold 4 floor(512 / cap) warps, the cap
// rounded up to 8; at most 32 blocks an SM).
constexpr update_shape warp_8_cached{};
constexpr update_shape warp_8_stream{.stream = 3};
constexpr update_shape warp_4_cached{.rows = 4, .max_regs = 64};
constexpr update_shape warp_4_stream{.rows = 4, .stream = 3, .max_regs = 64};
constexpr update_shape warp_2_cached{.rows = 2, .max_regs = 64};
constexpr update_shape warp_8_cached_64{.threads = 64};
constexpr update_shape warp_4_stream_128{.threads = 128, .rows = 4, .stream = 3, .max_regs = 64};
constexpr update_shape half_4_cached{.cols = 2, .rows = 4};
constexpr update_shape warp_8_store_stream{.stream = 2};
constexpr update_shape warp_8_cached_r64{.max_regs = 64};
constexpr update_shape warp_16_stream{.rows = 16, .stream = 3, .max_regs = 128};
constexpr update_shape warp_1_cached{.rows = 1, .max_regs = 48};

// Entries never change meaning (older sweeps stay comparable). Few rows are
// latency bound: many small blocks, the whole state asked for at once. Many
// rows stream the state once: bytes in flight an SM (registers a thread
// times warps), and streaming hints so the state does not evict the step's
// inputs from L2.
using update_launch = cudaError_t (*)(const ssd_update_params&, cudaStream_t);
constexpr update_launch update_table[] = {
    // 0: a block per (row, head), head_dim x 4 threads holding 8 float4 each (ssd.cu)
    detail::launch_ssd_update_blocks,
    // 1: a warp a state row, 8 rows a thread, 72 registers (28 warps an SM), cached
    // (the delta rule's decode entry 27)
    launch_shape<warp_8_cached>,
    // 2: 1 with streaming loads and stores
    launch_shape<warp_8_stream>,
    // 3: 4 rows a thread, 64 registers (32 warps), cached
    launch_shape<warp_4_cached>,
    // 4: 3 with streaming loads and stores
    launch_shape<warp_4_stream>,
    // 5: 2 rows a thread, cached (one row of the step: 4 times 1's warps)
    launch_shape<warp_2_cached>,
    // 6: 1 with two warps a block
    launch_shape<warp_8_cached_64>,
    // 7: 4 with four warps a block
    launch_shape<warp_4_stream_128>,
    // 8: half a warp a row (two float4 a lane at N 128), 4 rows a thread, cached
    launch_shape<half_4_cached>,
    // 9: 1 with streaming stores only
    launch_shape<warp_8_store_stream>,
    // 10: 1 at 64 registers (32 warps)
    launch_shape<warp_8_cached_r64>,
    // 11: 16 rows a thread, 128 registers (16 warps, 256 B of state a thread in flight), streaming
    launch_shape<warp_16_stream>,
    // 12: one row a thread, 48 registers (40 warps), cached (one step row: 8 times 1's warps)
    launch_shape<warp_1_cached>,
};
static_assert(std::size(update_table) == ssd_update_variants);

// The entry `ssd_update` takes: MSTAR_SSD_UPDATE_VARIANT (an index) when
// set and in the table, else entry 8 (bench/results/h200-kernels17.md,
// session 32's third call: the fastest or within 0.1 us of it at 1 / 16 / 64
// / 256 rows on both shapes; h64 2.15 / 12.72 / 69.04 / 267.06 us where
// entry 0 took 4.19 / 17.30 / 91.59 / 355.42). Shapes entry 8 does not
// take run entry 0.
int update_default() {
  static const int v = [] {
    const char* e = std::getenv("MSTAR_SSD_UPDATE_VARIANT");
    constexpr int measured = 8;
    if (e == nullptr)
      return measured;
    const int i = std::atoi(e);
    return i >= 0 && i < ssd_update_variants ? i : measured;
  }();
  return v;
}

}  // namespace

cudaError_t ssd_update(const ssd_update_params& p, cudaStream_t stream) {
  return update_table[update_default()](p, stream);
}

namespace {

// The gated-norm fold's shape: the default entry's (8). Its blocks take a
// head (256 threads at P 64, N 128); capped at 64 registers ptxas kept 80
// bytes of stack and the 0.56B's batch-1 step took 525 us against 505 at
// 72 (session 46, H100).
constexpr update_shape fold_shape = half_4_cached;
// Its state's loads and stores L2 evict-last (session 59, MSTAR_SSD_STATE_L2)
// gave the same bits and lost 3 us a step (H100, the 0.56B at batch 1:
// 481.4-481.7 us against 478.1-478.9; bench/results/session60-calls/);
// removed, its code in commit 7a26e8a. Its new state held in registers
// through the sums and stored between the block's arrival on the norm
// exchange's cluster barrier and its wait (session 61, MSTAR_SSD_FOLD_STORES
// =late) gave the same bits and lost too: 473.2-473.5 us a step against
// 471.2-473.5, the update's exposed time 5.08 against 4.85 us a layer under
// CUPTI (H100, bench/results/session61-calls/); removed, its code in commit
// fb7bf08. Its blocks counting themselves on a counter (zeroed by the
// layer's in_proj) once their normed quads were stored, the out_proj
// polling it instead of waiting for the grid (session 62,
// MSTAR_SSD_HANDOFF=1, the same bits) lost 4-5 us a step: 477.1-478.6 us
// against 472.5-473.7; under CUPTI the update took 6.36 us against 5.75
// (thread 0 of every out_proj block polling L2 with acquire loads beside
// it) and the out_proj still ended 6.8 us after the update's end, its
// weights' second half streaming only after its input was there; the
// kernel after the out_proj started only at the update's end either way
// (bench/results/session62-calls/, calls 1-2); removed, its code in commit
// 13b8602.
constexpr int fold_entry = 8;
static_assert(update_table[fold_entry] == &launch_shape<fold_shape>);
// Heads a cluster (a norm group) at most: the portable cluster size.
constexpr std::int64_t fold_max_cluster = 8;

bool aligned(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// The fold in shape S at N 4 N4 for the group's V, P / block_rows
// sub-blocks a block.
template <int N4, update_shape S, int V>
bool launch_fold_v(const update_args& a, int batch, unsigned cluster, cudaStream_t stream,
                   const detail::norm_fold_args& f) {
  switch (a.head_dim / detail::update_block_rows<N4, S>()) {
    case 1:
      detail::launch_update_fold<N4, S, V, 1>(a, batch, cluster, stream, f);
      return true;
    case 2:
      detail::launch_update_fold<N4, S, V, 2>(a, batch, cluster, stream, f);
      return true;
    case 4:
      detail::launch_update_fold<N4, S, V, 4>(a, batch, cluster, stream, f);
      return true;
    case 8:
      detail::launch_update_fold<N4, S, V, 8>(a, batch, cluster, stream, f);
      return true;
    default:
      return false;
  }
}

template <int N4, update_shape S>
bool launch_fold(const update_args& a, int batch, std::int64_t group, cudaStream_t stream,
                 const detail::norm_fold_args& f) {
  const auto cluster = static_cast<unsigned>(group / a.head_dim);
  switch (group / 128) {
    case 1:
      return launch_fold_v<N4, S, 1>(a, batch, cluster, stream, f);
    case 2:
      return launch_fold_v<N4, S, 2>(a, batch, cluster, stream, f);
    case 4:
      return launch_fold_v<N4, S, 4>(a, batch, cluster, stream, f);
    case 8:
      return launch_fold_v<N4, S, 8>(a, batch, cluster, stream, f);
    default:
      return false;
  }
}

template <update_shape S>
bool launch_fold_at(const update_args& a, int batch, std::int64_t group, cudaStream_t stream,
                    const detail::norm_fold_args& f) {
  return a.state_size == 128 ? launch_fold<32, S>(a, batch, group, stream, f)
                             : launch_fold<16, S>(a, batch, group, stream, f);
}

}  // namespace

namespace {

// ssd_update_gated_norm_fits, leaving the rows kernel's arguments in `a`
// where it takes the step (so the launcher checks and builds them once).
bool fold_args_of(const ssd_update_params& p, const ssd_gated_norm_fold& f, update_args& a) {
  if (!detail::clusters_built() || update_default() != fold_entry || !update_args_of(p, a))
    return false;
  const int block_rows = detail::update_block_rows_at<fold_shape>(a.state_size);
  const std::int64_t width = std::int64_t{a.heads} * a.head_dim;
  const std::int64_t v = f.group % 128 == 0 ? f.group / 128 : 0;
  const int sub = block_rows > 0 ? a.head_dim / block_rows : 0;
  return block_rows > 0 && a.head_dim % block_rows == 0 &&
         (sub == 1 || sub == 2 || sub == 4 || sub == 8) && a.head_dim % 4 == 0 &&
         a.head_dim / 4 <= detail::norm_fold_max_quads && (v == 1 || v == 2 || v == 4 || v == 8) &&
         f.group % a.head_dim == 0 && f.group / a.head_dim <= fold_max_cluster &&
         width % f.group == 0 && a.heads <= (1 << 30) && p.batch <= 65535 && p.y != nullptr &&
         aligned(p.y, 16) && f.gate != nullptr && aligned(f.gate, 16) &&
         (p.batch == 1 || (f.gate_stride % 4 == 0 && f.gate_stride >= width)) &&
         f.weight != nullptr && aligned(f.weight, 16) && f.out_bf16 != nullptr &&
         aligned(f.out_bf16, 8);
}

}  // namespace

bool ssd_update_gated_norm_fits(const ssd_update_params& p, const ssd_gated_norm_fold& f) {
  update_args a{};
  return fold_args_of(p, f, a);
}

cudaError_t ssd_update_gated_norm(const ssd_update_params& p, const ssd_gated_norm_fold& f,
                                  cudaStream_t stream) {
  update_args a{};
  if (!fold_args_of(p, f, a))
    return cudaErrorInvalidValue;
  const detail::norm_fold_args n{f.gate, f.gate_stride, f.weight, f.out_bf16, f.eps};
  const bool launched = launch_fold_at<fold_shape>(a, p.batch, f.group, stream, n);
  return launched ? detail::launch_status() : cudaErrorInvalidValue;
}

cudaError_t ssd_update_variant(const ssd_update_params& p, int variant, cudaStream_t stream) {
  if (variant < -1 || variant >= ssd_update_variants)
    return cudaErrorInvalidValue;
  return update_table[variant >= 0 ? variant : update_default()](p, stream);
}

}  // namespace mstar::kernels::cuda
