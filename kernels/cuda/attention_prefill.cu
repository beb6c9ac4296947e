// Tensor-core prefill for paged attention (flash-attention style), taken by
// `paged_attention` for steps without the decode arrays on bf16 arenas with
// head_dim 64, 128 or 256 (see `prefill_takes`).
//
// Work item: (row, tile of `tile_m` "M rows", kv head). A row's M rows are
// its (query token, query head of the kv head's group) pairs, token-major:
// M row f is token f / group, head kvh * group + f % group, so a tile holds
// tile_m / group tokens with every head of the group (GQA stacked into M).
// A block of 4 warps takes one item at a time. Each warp owns `mt`
// consecutive m16 tiles (32 M rows for head_dim 64 / 128, tile_m 128; 16
// for 256, tile_m 64, where a second set of output registers does not fit):
// every K / V fragment a warp reads from shared memory feeds its `mt` m16
// tiles, so head_dim 64 / 128 do 32 FLOP per shared-memory byte of K / V
// instead of 16. Q is staged into shared memory as bf16 (Q arrives f32:
// rounding it to bf16 changes numerics slightly against the f32-Q CUDA-core
// kernel); K / V tiles of `bn` positions (64; 32 for head_dim 256) are
// gathered from the row's pages with cp.async into two buffers (positions
// past the row's end zero-filled; one page-size division per tile and
// thread). Per K tile each warp computes S = Q K^T with mma.sync m16n8k16
// (bf16 in, f32 accumulate), masks the diagonal tiles (position > the
// query's absolute position prefix + token index; other tiles skip the
// compares), runs the online softmax on the accumulator registers in f32
// (the exp2 domain: maxima on raw scores, scaled once; weights
// 2^(s scale - max) from one FMA and ex2.approx.ftz each; Q negated for a
// negative scale), and adds P V (P rounded to bf16, V bf16) to its f32
// output registers, rescaling them (when some row's maximum rose) 16
// columns at a time just before their products. One barrier per K tile:
// after it, tile kt is visible and every warp is done with tile kt - 1, so
// the copy of tile kt + 1 into that buffer starts then and runs under tile
// kt's compute. Warps whose rows all lie before a K tile skip it; warps
// with no valid M row skip all compute (a 1-token row costs one warp).
//
// Items are enumerated without a scan: row r owns virtual tiles
// [base(r), base(r + 1)) with base(r) = floor(qo[r] * group / tile_m) + r,
// which holds its ceil(new_r * group / tile_m) tiles (the spare one, at most
// one per row, does nothing); a block finds an item's row by binary search
// over base(). Items run last virtual tile first, so each row's heaviest
// (latest) tiles start first. bench/attention_prefill_trace.py replays this
// indexing (items, fragments, masks) on the host.

#include <algorithm>
#include <cmath>

#include "kernels/cuda/internal/attend_prefill.cuh"
#include "kernels/cuda/internal/cp_async.cuh"
#include "kernels/cuda/internal/launch_setup.cuh"
#include "kernels/cuda/internal/mma_bf16.cuh"
#include "kernels/cuda/internal/prefill_rows.cuh"

namespace mstar::kernels::cuda::detail {
namespace {

constexpr int prefill_warps = 4;
constexpr int prefill_threads = prefill_warps * 32;

// Tile shape and shared memory of one block, in one place: the Q tile, then
// two K and two V tiles. Rows padded by 16 bytes so ldmatrix's 8 rows hit
// distinct banks.
template <int D>
struct prefill_shape {
  static constexpr int mt = D == 256 ? 1 : 2;            // m16 tiles per warp
  static constexpr int warp_m = 16 * mt;                 // M rows per warp
  static constexpr int tile_m = prefill_warps * warp_m;  // M rows per item
  static constexpr int bn = D == 256 ? 32 : 64;          // key positions per K / V tile
  static constexpr int stride = D + 8;                   // bf16 elements per smem row
  static constexpr int chunks = D / 8;                   // 16-byte chunks per head vector
  static constexpr int q_elems = tile_m * stride;
  static constexpr int kv_elems = bn * stride;  // one K (or V) tile
  static constexpr std::size_t smem_bytes =
      static_cast<std::size_t>(q_elems + 4 * kv_elems) * sizeof(std::uint16_t);
  static_assert(bn * chunks % prefill_threads == 0 && tile_m * chunks % prefill_threads == 0);
  static_assert(prefill_threads % chunks == 0);  // a thread keeps its column chunk
  static_assert(bn % 16 == 0 && D % 16 == 0);
};

// Starts the copy of K and V at positions t0 .. t0 + bn - 1 of the row into
// one buffer pair; positions at or past `length` are zero-filled. A thread
// copies one 16-byte column chunk of every `step`-th position from its
// first, so one division by the page size serves the whole tile.
template <int D>
__device__ __forceinline__ void load_kv_tile(const attn_args& a, const row_info& ri, int kvh,
                                             int t0, std::uint16_t* dk, std::uint16_t* dv) {
  using S = prefill_shape<D>;
  constexpr int step = prefill_threads / S::chunks;  // positions between a thread's chunks
  const int ps = a.arena.page_size;
  const int row0 = static_cast<int>(threadIdx.x) / S::chunks;
  const int col = static_cast<int>(threadIdx.x) % S::chunks * 8;
  int page_slot = (t0 + row0) / ps;  // page of position t0 + row (in the row's pages)
  int in_page = (t0 + row0) % ps;    // its slot in the page
  const std::byte* head = a.arena.at(0, 0, 0, kvh) + col * 2;  // K at page 0, slot 0
#pragma unroll
  for (int i = 0; i < S::bn / step; ++i) {
    const int row = row0 + i * step;
    const std::byte* ks = a.arena.base;
    const std::byte* vs = a.arena.base;
    int bytes = 0;
    if (t0 + row < ri.length) {
      const std::int32_t page = a.table.kv_indices[ri.first_page + page_slot];
      ks = head + static_cast<std::size_t>(page) * a.arena.page_bytes +
           static_cast<std::size_t>(in_page) * a.arena.token_bytes;  // arena.at(0, ...)
      vs = ks + a.arena.half_bytes;                                  // arena.at(1, ...)
      bytes = 16;
    }
    cp_async16(smem_addr(dk + row * S::stride + col), ks, bytes);
    cp_async16(smem_addr(dv + row * S::stride + col), vs, bytes);
    next_slot(page_slot, in_page, step, ps);
  }
}

// Writes the item's Q tile (M rows f0 .. f0 + tile_m - 1) into shared
// memory as bf16; M rows past the row's last are zeros. Q is negated for a
// negative scale (exact), so the softmax always scales by |scale|.
template <int D>
__device__ __forceinline__ void stage_q(const attn_args& a, const row_info& ri, int kvh, int f0,
                                        int m_rows, std::uint16_t* sq) {
  using S = prefill_shape<D>;
  const int group = a.group;
  const float sign = a.scale_log2 < 0.0F ? -1.0F : 1.0F;
#pragma unroll
  for (int i = 0; i < S::tile_m * S::chunks / prefill_threads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * prefill_threads;
    const int row = c / S::chunks;
    const int col = (c % S::chunks) * 8;
    const int f = f0 + row;
    uint4 packed = make_uint4(0U, 0U, 0U, 0U);
    if (f < m_rows) {
      const int token = ri.first_token + f / group;
      const int head = kvh * group + f % group;
      const auto* src = reinterpret_cast<const float4*>(
          a.q + (static_cast<std::size_t>(token) * a.q_heads + head) * D + col);
      const float4 x = src[0];
      const float4 y = src[1];
      packed = make_uint4(pack_bf16(sign * x.x, sign * x.y), pack_bf16(sign * x.z, sign * x.w),
                          pack_bf16(sign * y.x, sign * y.y), pack_bf16(sign * y.z, sign * y.w));
    }
    *reinterpret_cast<uint4*>(sq + row * S::stride + col) = packed;
  }
}

// Running state of one warp's M rows: output, maxima and sums per m16 tile,
// in the accumulator layout (see online_softmax).
template <int D>
struct warp_rows {
  static constexpr int mt = prefill_shape<D>::mt;
  float o[mt][D / 8][4];
  float m[mt][2];
  float l[mt][2];
};

// One warp's M rows against one K / V tile: S = Q K^T, online softmax,
// O += P V. Each K (V) fragment read from shared memory feeds every m16
// tile of the warp; `q_addr` is the warp's first Q row.
template <int D>
__device__ __forceinline__ void attend_tile(std::uint32_t q_addr, std::uint32_t k_addr,
                                            std::uint32_t v_addr, int t0, bool masked,
                                            const row_place& place, float scale, warp_rows<D>& w) {
  using S = prefill_shape<D>;
  constexpr int bn = S::bn;
  constexpr int mt = S::mt;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float s[mt][bn / 8][4];
#pragma unroll
  for (int i = 0; i < mt; ++i) {
#pragma unroll
    for (int n = 0; n < bn / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[i][n][e] = 0.0F;
    }
  }
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    std::uint32_t qa[mt][4];
#pragma unroll
    for (int i = 0; i < mt; ++i) {
      ldmatrix_x4(qa[i], q_addr + 2U * static_cast<std::uint32_t>((i * 16 + lane % 16) * S::stride +
                                                                  kc * 16 + (lane / 16) * 8));
    }
#pragma unroll
    for (int np = 0; np < bn / 16; ++np) {
      std::uint32_t kb[4];
      ldmatrix_x4(kb, k_addr + 2U * static_cast<std::uint32_t>(
                                        (np * 16 + lane % 8 + (lane / 16) * 8) * S::stride +
                                        kc * 16 + (lane / 8 % 2) * 8));
#pragma unroll
      for (int i = 0; i < mt; ++i) {
        mma_bf16(s[i][2 * np], qa[i], kb[0], kb[1]);
        mma_bf16(s[i][2 * np + 1], qa[i], kb[2], kb[3]);
      }
    }
  }
  // The S accumulators of n tiles 2kk, 2kk + 1 are P's A fragment kk.
  std::uint32_t pa[mt][bn / 16][4];
  float alpha[mt][2];  // output rescale of the lane's rows g, g + 8
#pragma unroll
  for (int i = 0; i < mt; ++i) {
    const int f = place.fw + i * 16 + lane / 4;  // the lane's rows f, f + 8
    online_softmax<bn>(s[i], t0, masked, masked ? place.pos_of(f) : 0,
                       masked ? place.pos_of(f + 8) : 0, scale, w.m[i], w.l[i], alpha[i]);
#pragma unroll
    for (int kk = 0; kk < bn / 16; ++kk) {
      pa[i][kk][0] = pack_bf16(s[i][2 * kk][0], s[i][2 * kk][1]);
      pa[i][kk][1] = pack_bf16(s[i][2 * kk][2], s[i][2 * kk][3]);
      pa[i][kk][2] = pack_bf16(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]);
      pa[i][kk][3] = pack_bf16(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
    }
  }
  // Output columns 16dp .. 16dp + 15 at a time: rescaled just before their
  // first P V product (fewer registers live than rescaling all O up front),
  // and only where some row of the warp raised its maximum (alpha below 1):
  // past the first tiles most leave every maximum where it was.
  bool same = true;
#pragma unroll
  for (int i = 0; i < mt; ++i)
    same = same && alpha[i][0] == 1.0F && alpha[i][1] == 1.0F;
  const bool rescale = !__all_sync(0xffffffffU, same);  // warp-uniform
#pragma unroll
  for (int dp = 0; dp < D / 16; ++dp) {
#pragma unroll
    for (int i = 0; i < mt && rescale; ++i) {
#pragma unroll
      for (int dn = 2 * dp; dn < 2 * dp + 2; ++dn) {
        w.o[i][dn][0] *= alpha[i][0];
        w.o[i][dn][1] *= alpha[i][0];
        w.o[i][dn][2] *= alpha[i][1];
        w.o[i][dn][3] *= alpha[i][1];
      }
    }
#pragma unroll
    for (int kk = 0; kk < bn / 16; ++kk) {
      std::uint32_t vb[4];
      ldmatrix_x4_trans(
          vb, v_addr + 2U * static_cast<std::uint32_t>((kk * 16 + lane % 8 + (lane / 8 % 2) * 8) *
                                                           S::stride +
                                                       dp * 16 + (lane / 16) * 8));
#pragma unroll
      for (int i = 0; i < mt; ++i) {
        mma_bf16(w.o[i][2 * dp], pa[i][kk], vb[0], vb[1]);
        mma_bf16(w.o[i][2 * dp + 1], pa[i][kk], vb[2], vb[3]);
      }
    }
  }
}

// Writes the warp's normalised output rows (first M row fw), skipping M
// rows past the row's last.
template <int D>
__device__ __forceinline__ void store_rows(const attn_args& a, const row_info& ri, int kvh, int fw,
                                           int m_rows, warp_rows<D>& w) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int i = 0; i < prefill_shape<D>::mt; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = w.l[i][h];
      sum += __shfl_xor_sync(0xffffffffU, sum, 1);
      sum += __shfl_xor_sync(0xffffffffU, sum, 2);
      const int f = fw + i * 16 + lane / 4 + 8 * h;
      if (f >= m_rows)
        continue;
      const float inv = 1.0F / sum;
      const int token = ri.first_token + f / a.group;
      const int head = kvh * a.group + f % a.group;
      float* op = a.out + (static_cast<std::size_t>(token) * a.q_heads + head) * D;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        *reinterpret_cast<float2*>(op + dn * 8 + 2 * (lane % 4)) =
            make_float2(w.o[i][dn][2 * h] * inv, w.o[i][dn][2 * h + 1] * inv);
      }
    }
  }
}

template <int D>
__global__ void __launch_bounds__(prefill_threads) attend_prefill(attn_args a) {
  using S = prefill_shape<D>;
  constexpr int bn = S::bn;
  constexpr int tile_m = S::tile_m;
  extern __shared__ uint4 prefill_smem[];
  auto* sq = reinterpret_cast<std::uint16_t*>(prefill_smem);
  std::uint16_t* sk = sq + S::q_elems;       // [2][bn][stride]
  std::uint16_t* sv = sk + 2 * S::kv_elems;  // [2][bn][stride]
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int rows = a.table.rows;
  const long long tiles = tile_base<tile_m>(a.table.qo, rows, a.group);
  const long long total = tiles * a.kv_heads;
  for (long long item = blockIdx.x; item < total; item += gridDim.x) {
    // Block-uniform: every `continue` and barrier below is taken by all.
    prefill_item it;
    if (!prefill_item_of<tile_m>(a, tiles, item, it))
      continue;  // the row's spare tile, or a row without pages for its tokens
    const int kvh = it.kvh;
    const row_info& ri = it.ri;
    const int m_rows = it.m_rows;
    const int f0 = it.f0;
    const int fw = f0 + warp * S::warp_m;  // this warp's first M row
    const row_place place{ri.length - ri.new_tokens, m_rows, a.group, fw};
    const int n_kt = place.pos_of(f0 + tile_m - 1) / bn + 1;

    // The previous item ended at a barrier: every buffer is free.
    load_kv_tile<D>(a, ri, kvh, 0, sk, sv);
    cp_async_commit();
    stage_q<D>(a, ri, kvh, f0, m_rows, sq);

    // The warp attends tiles up to its last row's position; none if it has
    // no valid M row.
    const int wmin = place.pos_of(fw);
    const int wmax = fw < m_rows ? place.pos_of(fw + S::warp_m - 1) : -1;
    warp_rows<D> w;
#pragma unroll
    for (int i = 0; i < S::mt; ++i) {
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          w.o[i][dn][e] = 0.0F;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        w.m[i][h] = -INFINITY;
        w.l[i][h] = 0.0F;
      }
    }
    const std::uint32_t q_addr = smem_addr(sq + warp * S::warp_m * S::stride);
    for (int kt = 0; kt < n_kt; ++kt) {
      const int buf = kt & 1;
      cp_async_wait<0>();  // this thread's copies of tile kt (the only ones in flight)
      // Tile kt (and Q) visible to every warp, and every warp is past tile
      // kt - 1: the other buffer is free for tile kt + 1.
      __syncthreads();
      if (kt + 1 < n_kt) {
        load_kv_tile<D>(a, ri, kvh, (kt + 1) * bn, sk + (buf ^ 1) * S::kv_elems,
                        sv + (buf ^ 1) * S::kv_elems);
        cp_async_commit();
      }
      const int t0 = kt * bn;
      if (t0 <= wmax) {
        attend_tile<D>(q_addr, smem_addr(sk + buf * S::kv_elems), smem_addr(sv + buf * S::kv_elems),
                       t0, t0 + bn - 1 > wmin, place, fabsf(a.scale_log2), w);
      }
    }
    if (fw < m_rows)
      store_rows<D>(a, ri, kvh, fw, m_rows, w);
    __syncthreads();  // every warp done with Q and the last K / V tile
  }
}

template <int D>
cudaError_t launch_prefill_d(const attn_args& a, std::int64_t token_bound, cudaStream_t stream) {
  using S = prefill_shape<D>;
  if (const cudaError_t err = raise_smem_limit<attend_prefill<D>>(S::smem_bytes);
      err != cudaSuccess)
    return err;
  // Items bound: virtual tiles <= bound * group / tile_m + rows, per kv
  // head.
  // Blocks past the device-side count exit at once; the rest stride.
  const std::int64_t items = (token_bound * a.group / S::tile_m + a.table.rows + 1) * a.kv_heads;
  const unsigned grid = grid_of(items, std::int64_t{sm_count()} * 32);
  attend_prefill<D><<<grid, prefill_threads, S::smem_bytes, stream>>>(a);
  return launch_status();
}

}  // namespace

bool prefill_takes(const paged_attention_params& p) {
  const int d = p.arena.geometry.head_dim;
  const auto aligned = [](const void* ptr) {
    return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
  };
  return !p.table.is_decode() && p.arena.geometry.dtype == mstar::dtype::bfloat16 &&
         (d == 64 || d == 128 || d == 256) && aligned(p.arena.base) && aligned(p.q) &&
         aligned(p.out);
}

cudaError_t launch_prefill(const attn_args& a, int head_dim, std::int64_t token_bound,
                           cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return launch_prefill_d<64>(a, token_bound, stream);
    case 128:
      return launch_prefill_d<128>(a, token_bound, stream);
    case 256:
      return launch_prefill_d<256>(a, token_bound, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace mstar::kernels::cuda::detail
