"""The warpgroup-MMA prefill attention's layouts checked on the host:
attend_prefill_wgmma (kernels/cuda/attention_prefill_wgmma.cu) transliterated
for one block taking every item in turn, its shared memory one NaN-filled
byte-addressed array (an element at byte address / 2). Q and the K / V tiles
are written where `swizzled` puts them (128-byte swizzle: chunk c of row r at
c ^ r % 8, column blocks of 64 elements), the copies of tile kt + 1 landing
before tile kt computes. wgmma reads its operands through descriptors packed
bit for bit as `wgmma_desc` packs them and decoded back, each element's
address following the PTX ISA's canonical layouts:
  K-major, 128-byte swizzle: ((8, m), (T, 2k)) : ((8T, SBO), (1, T)),
  MN-major, 128-byte swizzle: ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)),
(T = 8 bf16 elements; offsets in elements) with the swizzle applied to the
summed byte address (bits 4-6 ^= bits 7-9). The accumulator is dealt to the
threads as the ISA's m64nNk16 D fragment (warp w rows 16w .., per 8 columns
the m16n8 C layout) and P gathered back from the A-from-registers fragment.
With `defer` (the `wgmma` schedule) each tile's P V runs only at the next
tile's S wait (or the warpgroup's skip, or the item's end), after the copy of
the tile after that has landed: a stage reused too early shows as a wrong
result. Checks as bench/attention_prefill_trace.py: outputs written once, no
NaN, float64 attention within 1e-2 normalised.

  python3 bench/attention_prefill_wgmma_trace.py [name part]   (needs numpy)
"""

import numpy as np

from attention_prefill_trace import LG, LQ, RESUME, bf16, case, expect_output, quad_reduce
from attention_prefill_trace import kv_chunk, reference, tile_items, write_rows

THREADS = 256
GROUP_M, TILE_M, BN = 64, 128, 128
WARP_ROWS = np.arange(4)[:, None] * 16 + LG[None, :]  # [warp][lane]: row g of warp w


def swizzled(rows, r, c):
    """Byte offset of 16-byte chunk c of row r in a tile of `rows` rows."""
    return (c // 8) * rows * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4)


def wgmma_desc(addr, lbo, sbo):
    """The kernel's packing, returned decoded (what the hardware sees)."""
    x = ((addr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16) | (((sbo & 0x3FFFF) >> 4) << 32)
    x |= 1 << 62
    assert x >> 62 == 1 and (x >> 46) & 0xFFFF == 0, "fields overlap"
    return (x & 0x3FFF) << 4, ((x >> 16) & 0x3FFF) << 4, ((x >> 32) & 0x3FFF) << 4


def swizzle(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def read_k_major(smem, desc, rows):
    """[rows][16] from a K-major operand."""
    start, _, sbo = desc
    i, k = np.arange(rows)[:, None], np.arange(16)[None, :]
    addr = start + (i % 8) * 128 + (i // 8) * sbo + (k // 8) * 16 + (k % 8) * 2
    return smem[swizzle(addr) // 2].astype(np.float64)


def read_mn_major(smem, desc, cols):
    """[16][cols] from an MN-major operand."""
    start, lbo, sbo = desc
    k, n = np.arange(16)[:, None], np.arange(cols)[None, :]
    addr = start + (n % 8) * 2 + (n // 8 % 8) * 16 + (n // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo
    return smem[swizzle(addr) // 2].astype(np.float64)


def deal(mat):
    """[64][N] -> the D fragment [warp][N / 8][lane][4]."""
    n_tiles = mat.shape[1] // 8
    d = np.empty((4, n_tiles, 32, 4), np.float32)
    for n in range(n_tiles):
        for e in range(4):
            d[:, n, :, e] = mat[WARP_ROWS + 8 * (e // 2), 8 * n + 2 * LQ[None, :] + e % 2]
    return d


def gather_a(pa):
    """pa [warp][4][lane][2] (one k step) -> A [64][16]."""
    a = np.full((64, 16), np.nan)
    for j in range(4):
        rows = WARP_ROWS + 8 * (j & 1)
        cols = 2 * LQ[None, :] + 8 * (j >> 1)
        a[rows, cols] = pa[:, j, :, 0]
        a[rows, cols + 1] = pa[:, j, :, 1]
    return a


def qk_tile(smem, d, q_addr, k_addr):
    """S = Q K^T ([64][BN], float64) as the wgmmas read it from `smem` now:
    a consumer warpgroup's 64 rows of Q at q_addr, the BN rows of K at
    k_addr, d // 16 k-steps through the swizzled tiles' descriptors."""
    s = np.zeros((64, BN))
    for kc in range(d // 16):
        in_row = (kc % 4) * 32
        qd = wgmma_desc(q_addr + (kc // 4) * TILE_M * 128 + in_row, 16, 1024)
        kd = wgmma_desc(k_addr + (kc // 4) * BN * 128 + in_row, 16, 1024)
        s += read_k_major(smem, qd, 64) @ read_k_major(smem, kd, BN).T
    return s


def warp_softmax(g, s, w, t0, masked, place, scale):
    """online_softmax on warp w's rows of the dealt S tile `s` (in place: P,
    unnormalised), masked past each row's position where `masked`; updates
    the warpgroup's running max g["m"] and sum g["l"] and returns the
    rescale of its O, alpha [2, 32]."""
    prefix, m_rows, group, fg = place
    f = fg + 16 * w + LG
    p = [prefix + np.minimum(f + 8 * h, m_rows - 1) // group for h in range(2)]
    if masked:
        for n in range(BN // 8):
            for e in range(4):
                col = t0 + 2 * LQ + n * 8 + (e & 1)
                s[w, n, :, e] = np.where(col > p[e // 2], -np.inf, s[w, n, :, e])
    alpha = np.empty((2, 32), np.float32)
    for h in range(2):
        top = quad_reduce(s[w, :, :, 2 * h:2 * h + 2].max(axis=(0, 2)), np.max)
        m = g["m"][w, h]
        mx = np.maximum(m, top * np.float32(scale))
        ref = np.where(mx == -np.inf, 0, mx).astype(np.float32)
        alpha[h] = np.exp2(m - ref)
        g["m"][w, h] = mx
        arg = (s[w, :, :, 2 * h:2 * h + 2].astype(np.float64) * scale -
               ref[None, :, None]).astype(np.float32)
        s[w, :, :, 2 * h:2 * h + 2] = np.exp2(arg)
        g["l"][w, h] = g["l"][w, h] * alpha[h] + s[w, :, :, 2 * h:2 * h + 2].sum(axis=(0, 2))
    return alpha


def run(c, defer):
    d = c.d
    chunks, stages = d // 8, 3 if defer else 2
    q_bytes, kv_bytes = TILE_M * d * 2, BN * d * 2
    smem = np.full((q_bytes + 2 * stages * kv_bytes) // 2, np.nan, np.float32)
    k0 = q_bytes
    v0 = k0 + stages * kv_bytes
    out = np.full((int(c.qo[-1]), c.q_heads, d), np.nan)
    writes = np.zeros(out.shape[:2], int)

    def put(addr, x):
        smem[addr // 2:addr // 2 + 8] = x

    def load_kv_tile(r, kvh, t0, dk, dv):
        step = THREADS // chunks
        for tid in range(THREADS):
            row0, chunk = tid // chunks, tid % chunks
            col = chunk * 8
            page_slot, in_page = (t0 + row0) // c.ps, (t0 + row0) % c.ps
            for i in range(BN // step):
                row = row0 + i * step
                kx, vx = kv_chunk(c, r, kvh, t0 + row, page_slot, in_page, col)
                put(dk + swizzled(BN, row, chunk), kx)
                put(dv + swizzled(BN, row, chunk), vx)
                in_page += step
                while in_page >= c.ps:
                    in_page -= c.ps
                    page_slot += 1

    def stage_q(r, kvh, f0, m_rows):
        sign = np.float32(-1 if c.scale_log2 < 0 else 1)
        for tid in range(THREADS):
            for i in range(TILE_M * chunks // THREADS):
                cc = tid + i * THREADS
                row, chunk = cc // chunks, cc % chunks
                f = f0 + row
                x = np.zeros(8, np.float32)
                if f < m_rows:
                    token = int(c.qo[r]) + f // c.group
                    head = kvh * c.group + f % c.group
                    x = bf16(sign * c.q[token, head, chunk * 8:chunk * 8 + 8])
                put(swizzled(TILE_M, row, chunk), x)

    def issue_pv(g, v_addr, pa):
        o = np.zeros((64, d))
        for kk in range(BN // 16):
            vd = wgmma_desc(v_addr + kk * 16 * 128, BN * 128, 1024)
            o += gather_a(pa[:, kk]) @ read_mn_major(smem, vd, d)
        g["o"] += deal(o)

    def attend_tile(g, q_addr, k_addr, v_addr, t0, masked, place, scale):
        s = qk_tile(smem, d, q_addr, k_addr)
        if g["pending"] is not None:  # the wait for S completes the deferred P V
            issue_pv(g, *g["pending"])
            g["pending"] = None
        s = deal(s.astype(np.float32))
        pa = np.empty((4, BN // 16, 4, 32, 2), np.float32)
        for w in range(4):
            alpha = warp_softmax(g, s, w, t0, masked, place, scale)
            for kk in range(BN // 16):
                pa[w, kk, 0] = bf16(s[w, 2 * kk][:, 0:2])
                pa[w, kk, 1] = bf16(s[w, 2 * kk][:, 2:4])
                pa[w, kk, 2] = bf16(s[w, 2 * kk + 1][:, 0:2])
                pa[w, kk, 3] = bf16(s[w, 2 * kk + 1][:, 2:4])
            if not np.all(alpha == 1):
                g["o"][w, :, :, 0:2] *= alpha[0][None, :, None]
                g["o"][w, :, :, 2:4] *= alpha[1][None, :, None]
        if defer:
            g["pending"] = (v_addr, pa)
        else:
            issue_pv(g, v_addr, pa)

    for kvh, r, m_rows, f0, prefix in tile_items(c, TILE_M):

        def pos_of(f):
            return prefix + min(f, m_rows - 1) // c.group

        n_kt = pos_of(f0 + TILE_M - 1) // BN + 1
        load_kv_tile(r, kvh, 0, k0, v0)
        stage_q(r, kvh, f0, m_rows)
        groups = []
        for wg in range(2):
            fg = f0 + wg * GROUP_M
            groups.append(dict(
                fg=fg, gmin=pos_of(fg), gmax=pos_of(fg + GROUP_M - 1) if fg < m_rows else -1,
                o=np.zeros((4, d // 8, 32, 4), np.float32), m=np.full((4, 2, 32), -np.inf, np.float32),
                l=np.zeros((4, 2, 32), np.float32), pending=None))
        for kt in range(n_kt):
            buf, nxt = (kt % stages) * kv_bytes, ((kt + 1) % stages) * kv_bytes
            if kt + 1 < n_kt:  # lands before tile kt computes: the worst case
                load_kv_tile(r, kvh, (kt + 1) * BN, k0 + nxt, v0 + nxt)
            t0 = kt * BN
            for wg, g in enumerate(groups):
                if t0 <= g["gmax"]:
                    attend_tile(g, wg * GROUP_M * 128, k0 + buf, v0 + buf, t0,
                                t0 + BN - 1 > g["gmin"], (prefix, m_rows, c.group, g["fg"]),
                                abs(c.scale_log2))
                elif g["pending"] is not None:
                    issue_pv(g, *g["pending"])
                    g["pending"] = None
        for g in groups:
            if g["pending"] is not None:
                issue_pv(g, *g["pending"])
                g["pending"] = None
            for w in range(4):
                fw = g["fg"] + 16 * w
                if fw < m_rows:
                    write_rows(c, r, kvh, fw, g["o"][w], g["l"][w], m_rows, out, writes)
    return out, writes


def check(c, defer):
    out, writes = run(c, defer)
    ref = reference(c)
    name = f"{c.name} ({'wgmma' if defer else 'wgmma_serial'})"
    expect_output(name, out, writes, ref)


CASES = [
    ("d128 group 4 ps16 1x300", 128, 4, 1, 16, [(0, 300)]),
    ("d64 group 1 ps64 mixed", 64, 1, 2, 64, [(0, 200), (3, 1), (0, 70), (199, 5)]),
    ("d128 group 6 ps16 resume", 128, 6, 1, 16, RESUME[1:]),
    ("d64 group 8 ps16 resume", 64, 8, 1, 16, RESUME),
    ("d64 group 2 ps5 negative scale", 64, 2, 2, 5, [(3, 40), (0, 17), (11, 1)], -0.2),
    ("d128 group 1 ps3", 128, 1, 1, 3, [(20, 270)]),
]

if __name__ == "__main__":
    import sys

    # An argument picks the cases whose name contains it.
    for seed, spec in enumerate(CASES, 1):
        if len(sys.argv) < 2 or sys.argv[1] in spec[0]:
            for defer in (True, False):
                check(case(*spec[:6], seed, *spec[6:]), defer)
