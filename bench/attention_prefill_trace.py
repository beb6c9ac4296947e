"""The tensor-core prefill attention's indexing checked on the host:
attend_prefill (kernels/cuda/attention_prefill.cu) transliterated loop for
loop for one block taking every item in turn (virtual tiles last first, the
row found by binary search over tile_base, spare tiles skipped), with its
shared memory as flat NaN-filled arrays at the kernel's offsets and strides
(Q tile, two K and two V buffers, kept across items). K / V tiles are
gathered from a shuffled page table (positions past the row's end
zero-filled) and the copy of tile kt + 1 lands before tile kt computes, as
the worst case of the one-barrier pipeline would have it. ldmatrix (.x4 and
.x4.trans) and mma.sync m16n8k16 run per lane as the PTX ISA lays them out:
each lane's row addresses, its registers dealt from the four 8x8 matrices,
the 16x16 / 16x8 operands assembled from the lanes' registers, the result
dealt back. The online softmax runs on the lanes' accumulators (quad
shuffles as reductions over the lane's group). Checks: every output element
written exactly once (and none of the padding rows), every (M row, key
position) taken unmasked exactly once for positions up to the query's and
never after, no NaN (a read of shared memory nothing wrote), and the output
against float64 attention within 1e-2 normalised (q and P rounded to bf16
as on the GPU). Shapes: head_dim 64 / 128 / 256, groups 1 / 4 / 6 / 8, page
sizes 3 / 5 / 16 / 64 (pages shorter than a thread's position step), a negative
scale, rows resuming after prefixes, 1-token rows, a row computing
nothing. Keep it in step with the kernel when its tiles or layouts change.

  python3 bench/attention_prefill_trace.py [name part]   (needs numpy; about a minute)
"""

import numpy as np

WARPS = 4
LANES = np.arange(32)
LG, LQ = LANES // 4, LANES % 4


def shape(d):
    """prefill_shape<D>."""
    mt = 1 if d == 256 else 2
    warp_m = 16 * mt
    tile_m = WARPS * warp_m
    bn = 32 if d == 256 else 64
    return dict(mt=mt, warp_m=warp_m, tile_m=tile_m, bn=bn, stride=d + 8, chunks=d // 8)


def bf16(x):
    """Round to nearest even bf16, kept as float32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def ldmatrix_x4(smem, addr, trans=False):
    """Registers [4][32][2] (lo, hi) from per-lane byte addresses [32]."""
    assert np.all(addr % 16 == 0)
    out = np.empty((4, 32, 2), np.float32)
    for j in range(4):
        rows = addr[8 * j:8 * j + 8] // 2  # element index of each 8x8 row
        mat = np.stack([smem[r:r + 8] for r in rows])  # [8 rows][8 cols]
        if trans:
            mat = mat.T
        out[j, :, 0] = mat[LG, 2 * LQ]
        out[j, :, 1] = mat[LG, 2 * LQ + 1]
    return out


def mma(c, a, b0, b1):
    """c [32][4] += A B: a [4][32][2] registers, b0 / b1 [32][2]."""
    A = np.full((16, 16), np.nan, np.float64)
    for j in range(4):
        r = LG + 8 * (j & 1)
        k = 2 * LQ + 8 * (j >> 1)
        A[r, k], A[r, k + 1] = a[j][:, 0], a[j][:, 1]
    B = np.full((16, 8), np.nan, np.float64)
    B[2 * LQ, LG], B[2 * LQ + 1, LG] = b0[:, 0], b0[:, 1]
    B[2 * LQ + 8, LG], B[2 * LQ + 9, LG] = b1[:, 0], b1[:, 1]
    C = A @ B
    c[:, 0] += C[LG, 2 * LQ]
    c[:, 1] += C[LG, 2 * LQ + 1]
    c[:, 2] += C[LG + 8, 2 * LQ]
    c[:, 3] += C[LG + 8, 2 * LQ + 1]


def quad_reduce(x, fn):
    """__shfl_xor 1 then 2: every lane gets its quad's reduction."""
    q = x.reshape(8, 4)
    return np.repeat(fn(q, axis=1), 4)


class case:
    def __init__(self, name, d, group, kv_heads, page_size, rows, seed, scale=None):
        rng = np.random.default_rng(seed)
        self.name, self.d, self.group, self.kvh, self.ps = name, d, group, kv_heads, page_size
        self.rows = rows  # (prefix, new)
        self.qo = np.cumsum([0] + [n for _, n in rows])
        tokens = int(self.qo[-1])
        self.q_heads = group * kv_heads
        self.q = rng.standard_normal((tokens, self.q_heads, d)).astype(np.float32)
        # Pages of every row, shuffled over one arena.
        self.kv_indptr, pages = [0], 0
        for p, n in rows:
            pages += -(-(p + n) // page_size)
            self.kv_indptr.append(pages)
        self.kv_indices = rng.permutation(pages)
        self.arena = bf16(rng.standard_normal((2, pages, page_size, kv_heads, d)))
        self.scale_log2 = np.float32((scale or 1.0 / np.sqrt(d)) * 1.4426950408889634)

    def length(self, r):
        return self.rows[r][0] + self.rows[r][1]

    def kv_at(self, which, r, t, kvh):
        page = self.kv_indices[self.kv_indptr[r] + t // self.ps]
        return self.arena[which, page, t % self.ps, kvh]


def tile_base(c, r, tile_m):
    return int(c.qo[r]) * c.group // tile_m + r


def row_of_tile(c, tile_m, k):
    lo, hi = 0, len(c.rows)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tile_base(c, mid, tile_m) <= k:
            lo = mid
        else:
            hi = mid
    return lo


def tile_item(c, tile_m, tiles, item):
    """Grid item `item` of `tiles` M tiles per KV head (heads fastest, the
    last tiles first): (kvh, r, m_rows, f0, prefix), or None where the tile
    holds no row of its step row."""
    kvh = item % c.kvh
    k = tiles - 1 - item // c.kvh
    r = row_of_tile(c, tile_m, k)
    new, length = c.rows[r][1], c.length(r)
    m_rows = new * c.group
    f0 = (k - tile_base(c, r, tile_m)) * tile_m
    if f0 >= m_rows or length < new:
        return None
    return kvh, r, m_rows, f0, length - new


def kv_chunk(c, r, kvh, t, page_slot, in_page, col):
    """K and V at position t of row r (in page slot `page_slot`, at
    `in_page`), columns col..col + 8, as load_kv_tile copies them: zeros
    past the row."""
    if t < c.length(r):
        page = c.kv_indices[c.kv_indptr[r] + page_slot]
        return (c.arena[0, page, in_page, kvh, col:col + 8],
                c.arena[1, page, in_page, kvh, col:col + 8])
    zeros = np.zeros(8, np.float32)
    return zeros, zeros


def tile_items(c, tile_m):
    """The grid's items in order (tile_item), those that hold rows."""
    tiles = tile_base(c, len(c.rows), tile_m)
    for item in range(tiles * c.kvh):
        placed = tile_item(c, tile_m, tiles, item)
        if placed is not None:
            yield placed


def write_rows(c, r, kvh, fw, o, l, m_rows, out, writes):
    """The epilogue of 16 M rows from `fw` of row r, KV head kvh: the O
    fragments `o` [d/8, 32, 4] over the quad-summed `l` [2, 32] into `out`,
    each (token, head) written counted in `writes`."""
    for h in range(2):
        total = quad_reduce(l[h], np.sum)
        f = fw + LG + 8 * h
        for lane in range(32):
            if f[lane] >= m_rows:
                continue
            token = int(c.qo[r]) + f[lane] // c.group
            head = kvh * c.group + f[lane] % c.group
            for dn in range(o.shape[0]):
                col = dn * 8 + 2 * (lane % 4)
                out[token, head, col:col + 2] = o[dn, lane, 2 * h:2 * h + 2] / total[lane]
            if lane % 4 == 0:
                writes[token, head] += 1


def expect_output(name, out, writes, ref):
    """Every output written once, none NaN, within 1e-2 normalised of `ref`."""
    assert np.all(writes == 1), f"{name}: writes {np.unique(writes)}"
    assert not np.isnan(out).any(), f"{name}: NaN output"
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < 1e-2, f"{name}: normalised error {err}"
    print(f"{name}: ok, normalised error {err:.2e}")


def run(c):
    d, S = c.d, shape(c.d)
    mt, bn, tile_m, stride, chunks = S["mt"], S["bn"], S["tile_m"], S["stride"], S["chunks"]
    q_elems, kv_elems = tile_m * stride, bn * stride
    smem = np.full(q_elems + 4 * kv_elems, np.nan, np.float32)
    sq, sk, sv = 0, q_elems, q_elems + 2 * kv_elems
    out = np.full((int(c.qo[-1]), c.q_heads, d), np.nan)
    writes = np.zeros(out.shape[:2], int)
    taken = {}  # (row, kvh, f) -> count per position

    def load_kv_tile(r, kvh, t0, dk, dv):
        step = WARPS * 32 // chunks
        for tid in range(WARPS * 32):
            row0, col = tid // chunks, tid % chunks * 8
            page_slot, in_page = (t0 + row0) // c.ps, (t0 + row0) % c.ps
            for i in range(bn // step):
                row = row0 + i * step
                kx, vx = kv_chunk(c, r, kvh, t0 + row, page_slot, in_page, col)
                smem[dk + row * stride + col:dk + row * stride + col + 8] = kx
                smem[dv + row * stride + col:dv + row * stride + col + 8] = vx
                in_page += step
                while in_page >= c.ps:
                    in_page -= c.ps
                    page_slot += 1

    def stage_q(r, kvh, f0, m_rows):
        sign = np.float32(-1 if c.scale_log2 < 0 else 1)
        for tid in range(WARPS * 32):
            for i in range(tile_m * chunks // (WARPS * 32)):
                cc = tid + i * WARPS * 32
                row, col = cc // chunks, (cc % chunks) * 8
                f = f0 + row
                x = np.zeros(8, np.float32)
                if f < m_rows:
                    token = int(c.qo[r]) + f // c.group
                    head = kvh * c.group + f % c.group
                    x = bf16(sign * c.q[token, head, col:col + 8])
                smem[sq + row * stride + col:sq + row * stride + col + 8] = x

    for kvh, r, m_rows, f0, prefix in tile_items(c, tile_m):

        def pos_of(f):
            return prefix + min(f, m_rows - 1) // c.group

        n_kt = pos_of(f0 + tile_m - 1) // bn + 1
        load_kv_tile(r, kvh, 0, sk, sv)
        stage_q(r, kvh, f0, m_rows)
        warps = []
        for warp in range(WARPS):
            fw = f0 + warp * S["warp_m"]
            wmin = pos_of(fw)
            wmax = pos_of(fw + S["warp_m"] - 1) if fw < m_rows else -1
            o = np.zeros((mt, d // 8, 32, 4), np.float32)
            m = np.full((mt, 2, 32), -np.inf, np.float32)
            l = np.zeros((mt, 2, 32), np.float32)
            warps.append((fw, wmin, wmax, o, m, l))
        for kt in range(n_kt):
            buf = kt & 1
            if kt + 1 < n_kt:  # lands before tile kt computes: the worst case
                load_kv_tile(r, kvh, (kt + 1) * bn, sk + (buf ^ 1) * kv_elems,
                             sv + (buf ^ 1) * kv_elems)
            t0 = kt * bn
            for warp, (fw, wmin, wmax, o, m, l) in enumerate(warps):
                if t0 > wmax:
                    continue
                masked = t0 + bn - 1 > wmin
                q_addr = 2 * (sq + warp * S["warp_m"] * stride)
                k_addr = 2 * (sk + buf * kv_elems)
                v_addr = 2 * (sv + buf * kv_elems)
                attend_tile(smem, d, S, q_addr, k_addr, v_addr, t0, masked,
                            (prefix, m_rows, c.group, fw), abs(c.scale_log2), o, m, l)
                for (f, t), n in attend_tile.taken.items():
                    taken[(r, kvh, f, t)] = taken.get((r, kvh, f, t), 0) + n
        for fw, wmin, wmax, o, m, l in warps:
            if fw >= m_rows:
                continue
            for i in range(mt):
                write_rows(c, r, kvh, fw + i * 16, o[i], l[i], m_rows, out, writes)
    return out, writes, taken


def attend_tile(smem, d, S, q_addr, k_addr, v_addr, t0, masked, place, scale, o, m, l):
    """attend_tile<D>; the (M row, position) pairs taken unmasked land in attend_tile.taken."""
    mt, bn, stride = S["mt"], S["bn"], S["stride"]
    prefix, m_rows, group, fw = place
    lane = LANES
    s = np.zeros((mt, bn // 8, 32, 4), np.float32)
    for kc in range(d // 16):
        qa = [ldmatrix_x4(smem, q_addr + 2 * ((i * 16 + lane % 16) * stride + kc * 16 +
                                              (lane // 16) * 8)) for i in range(mt)]
        for np_ in range(bn // 16):
            kb = ldmatrix_x4(smem, k_addr + 2 * ((np_ * 16 + lane % 8 + (lane // 16) * 8) * stride +
                                                 kc * 16 + (lane // 8 % 2) * 8))
            for i in range(mt):
                mma(s[i, 2 * np_], qa[i], kb[0], kb[1])
                mma(s[i, 2 * np_ + 1], qa[i], kb[2], kb[3])
    attend_tile.taken = {}
    pa = np.empty((mt, bn // 16, 4, 32, 2), np.float32)
    alpha = np.empty((mt, 2, 32), np.float32)
    for i in range(mt):
        f = fw + i * 16 + lane // 4
        p = [prefix + np.minimum(f + 8 * h, m_rows - 1) // group for h in range(2)]
        if masked:
            for n in range(bn // 8):
                for e in range(4):
                    col = t0 + 2 * (lane % 4) + n * 8 + (e & 1)
                    s[i, n, :, e] = np.where(col > p[e // 2], -np.inf, s[i, n, :, e])
        top = np.full((2, 32), -np.inf, np.float32)
        for n in range(bn // 8):
            for e in range(4):
                x = s[i, n, :, e]
                col = t0 + n * 8 + 2 * (lane % 4) + (e & 1)
                top[e // 2] = np.maximum(top[e // 2], x)
                for ln in range(32):
                    row = f[ln] + 8 * (e // 2)
                    if x[ln] != -np.inf and row < m_rows:
                        key = (int(row), int(col[ln]))
                        attend_tile.taken[key] = attend_tile.taken.get(key, 0) + 1
        for h in range(2):
            top[h] = quad_reduce(top[h], np.max)
            mx = np.maximum(m[i, h], top[h] * np.float32(scale))
            ref = np.where(mx == -np.inf, 0, mx).astype(np.float32)
            alpha[i, h] = np.exp2(m[i, h] - ref)
            m[i, h] = mx
            total = np.zeros(32, np.float32)
            for n in range(bn // 8):
                for e in range(2 * h, 2 * h + 2):
                    arg = (s[i, n, :, e].astype(np.float64) * scale - ref).astype(np.float32)
                    s[i, n, :, e] = np.exp2(arg)  # fmaf: one rounding
                    total += s[i, n, :, e]
            l[i, h] = l[i, h] * alpha[i, h] + total
        for kk in range(bn // 16):
            pa[i, kk, 0] = bf16(s[i, 2 * kk][:, 0:2])
            pa[i, kk, 1] = bf16(s[i, 2 * kk][:, 2:4])
            pa[i, kk, 2] = bf16(s[i, 2 * kk + 1][:, 0:2])
            pa[i, kk, 3] = bf16(s[i, 2 * kk + 1][:, 2:4])
    rescale = not np.all(alpha == 1)  # __all_sync over the warp
    for dp in range(d // 16):
        for i in range(mt if rescale else 0):
            o[i, 2 * dp:2 * dp + 2, :, 0:2] *= alpha[i, 0][None, :, None]
            o[i, 2 * dp:2 * dp + 2, :, 2:4] *= alpha[i, 1][None, :, None]
        for kk in range(bn // 16):
            vb = ldmatrix_x4(smem, v_addr + 2 * ((kk * 16 + lane % 8 + (lane // 8 % 2) * 8) * stride +
                                                 dp * 16 + (lane // 16) * 8), trans=True)
            for i in range(mt):
                mma(o[i, 2 * dp], pa[i, kk], vb[0], vb[1])
                mma(o[i, 2 * dp + 1], pa[i, kk], vb[2], vb[3])


def reference(c):
    out = np.zeros((int(c.qo[-1]), c.q_heads, c.d))
    for r, (prefix, new) in enumerate(c.rows):
        for kvh in range(c.kvh):
            n = prefix + new
            K = np.stack([c.kv_at(0, r, t, kvh) for t in range(n)]).astype(np.float64)
            V = np.stack([c.kv_at(1, r, t, kvh) for t in range(n)]).astype(np.float64)
            for j in range(new):
                token = int(c.qo[r]) + j
                for g in range(c.group):
                    head = kvh * c.group + g
                    x = bf16(c.q[token, head]).astype(np.float64) @ K[:prefix + j + 1].T
                    x = x * c.scale_log2
                    w = np.exp2(x - x.max())
                    out[token, head] = (w / w.sum()) @ V[:prefix + j + 1]
    return out


def check(c):
    out, writes, taken = run(c)
    ref = reference(c)
    for r, (prefix, new) in enumerate(c.rows):
        for kvh in range(c.kvh):
            for f in range(new * c.group):
                for t in range(prefix + f // c.group + 1):
                    assert taken.pop((r, kvh, f, t), 0) == 1, f"{c.name}: ({r} {kvh} {f} {t})"
    assert not taken, f"{c.name}: positions past the query taken: {list(taken)[:5]}"
    expect_output(c.name, out, writes, ref)


RESUME = [(500, 100), (64, 64), (1000, 1), (37, 70), (16, 0), (127, 129), (5, 65)]

CASES = [
    ("d128 group 4 ps16 1x300", 128, 4, 1, 16, [(0, 300)]),
    ("d64 group 1 ps64 mixed", 64, 1, 2, 64, [(0, 200), (3, 1), (0, 70), (199, 5)]),
    ("d128 group 6 ps16 resume", 128, 6, 1, 16, RESUME[1:]),
    ("d256 group 8 ps16 resume", 256, 8, 1, 16, [(37, 70), (1000, 1), (16, 0)]),
    ("d64 group 8 ps16 resume", 64, 8, 1, 16, RESUME),
    ("d64 group 2 ps5 negative scale", 64, 2, 2, 5, [(3, 40), (0, 17), (11, 1)], -0.2),
    ("d128 group 1 ps3", 128, 1, 1, 3, [(20, 70)]),
    ("d256 group 4 ps3", 256, 4, 1, 3, [(2, 30)]),
]

if __name__ == "__main__":
    import sys

    # An argument picks the cases whose name contains it.
    for seed, spec in enumerate(CASES, 1):
        if len(sys.argv) < 2 or sys.argv[1] in spec[0]:
            check(case(*spec[:6], seed, *spec[6:]))
