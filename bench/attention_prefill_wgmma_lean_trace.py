"""The lean wgmma prefill attention checked on the host:
attend_prefill_wgmma_lean (kernels/cuda/attention_prefill_wgmma_lean.cu,
internal/prefill_wgmma_lean.cuh) transliterated for one block taking every
item in turn, on bench/attention_prefill_wgmma_trace.py's machinery (a
NaN-filled byte-addressed shared memory, descriptors decoded bit for bit,
the ISA's fragment layouts, the three-stage buffer reuse with each P V run
only at the next S wait). What it checks beyond that trace:
  - the gather: each thread's positions t0 + row0 + i step, the page slot
    and place in the page as the kernel computes them (Ps 16: the tile's
    first slot plus i step / 16, the place folded into the thread's bases;
    Ps 0: shift and mask), the tiles that skip the position checks lying
    wholly inside the row;
  - descriptors as a low word plus a byte step / 16 with the constant high
    word: the sum never carries out of the 14-bit address field;
  - the ones atom written one 32-bit word a thread and read as B of 8 m64n8
    wgmmas: the row sums the epilogue divides by;
  - the lazy rescale (reference maxima moved only past a margin of 8) with
    the exact final normalisation; a large-scale case makes maxima move
    often, and the run counts the rescales it took.
Checks: outputs written once, no NaN, float64 attention within 1e-2
normalised.

  python3 bench/attention_prefill_wgmma_lean_trace.py [name part]   (needs numpy)
"""

import numpy as np

from attention_prefill_trace import LG, LQ, RESUME, bf16, case, expect_output, quad_reduce
from attention_prefill_trace import reference, tile_items
from attention_prefill_wgmma_trace import BN, GROUP_M, THREADS, TILE_M, deal, gather_a
from attention_prefill_wgmma_trace import read_k_major, read_mn_major, swizzled

MARGIN = 8.0
DESC_HI = (1024 >> 4) | 1 << 30  # lean_desc_hi


def desc_lo(addr, lbo):
    """wgmma_desc(addr, lbo, 1024)'s low word."""
    return ((addr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16)


def desc_at(lo, step):
    """lean_desc::at: the low word plus step / 16, decoded as the hardware
    reads it; the address field must not carry into the LBO."""
    assert step % 16 == 0
    word = lo + (step >> 4)
    assert (word & 0x3FFF) == (lo & 0x3FFF) + (step >> 4), "address field carried"
    x = word | DESC_HI << 32
    assert x >> 62 == 1
    return (x & 0x3FFF) << 4, ((x >> 16) & 0x3FFF) << 4, ((x >> 32) & 0x3FFF) << 4


def run(c, stats):
    d = c.d
    chunks, stages = d // 8, 3
    step = THREADS // chunks
    q_bytes, kv_bytes = TILE_M * d * 2, BN * d * 2
    k0 = q_bytes
    v0 = k0 + stages * kv_bytes
    ones = v0 + stages * kv_bytes
    smem = np.full((ones + 1024) // 2, np.nan, np.float32)
    assert ones + 1024 + 1024 <= 232448, "over the opt-in shared memory"
    assert c.ps & (c.ps - 1) == 0, "the lean kernel takes power-of-two pages"
    lps = c.ps.bit_length() - 1
    ps_fixed = 16 if c.ps == 16 else 0
    out = np.full((int(c.qo[-1]), c.q_heads, d), np.nan)
    writes = np.zeros(out.shape[:2], int)
    for tid in range(THREADS):  # the ones atom, a 32-bit word (two bf16 1.0) each
        smem[ones // 2 + 2 * tid:ones // 2 + 2 * tid + 2] = 1.0

    def put(addr, x):
        smem[addr // 2:addr // 2 + 8] = x

    def load_tile(r, kvh, t0, dk, dv):
        length = c.length(r)
        edge = t0 + BN > length
        pages = c.kv_indices[c.kv_indptr[r]:c.kv_indptr[r + 1]]
        for tid in range(THREADS):
            row0, chunk = tid // chunks, tid % chunks
            in_page0 = row0 & (ps_fixed - 1) if ps_fixed else 0  # folded into the bases
            soff = swizzled(BN, row0, chunk)
            pos0 = t0 + row0
            slot0 = pos0 >> lps
            for i in range(BN // step):
                pos = pos0 + i * step
                if edge and pos >= length:
                    kx = vx = np.zeros(8, np.float32)
                else:
                    assert pos < length, "an unchecked position past the row"
                    if ps_fixed:
                        page, in_page = pages[slot0 + i * (step // ps_fixed)], in_page0
                    else:
                        page, in_page = pages[pos >> lps], pos & ((1 << lps) - 1)
                    assert (page, in_page) == (pages[pos // c.ps], pos % c.ps)
                    kx = c.arena[0, page, in_page, kvh, chunk * 8:chunk * 8 + 8]
                    vx = c.arena[1, page, in_page, kvh, chunk * 8:chunk * 8 + 8]
                at = soff + i * step * 128
                assert at == swizzled(BN, row0 + i * step, chunk)
                put(dk + at, kx)
                put(dv + at, vx)

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

    def issue_pv(g, v_lo, pa):
        o = np.zeros((64, d))
        lsum = np.zeros((64, 8))
        ones_desc = desc_at(desc_lo(ones, 16), 0)
        for kk in range(BN // 16):
            a = gather_a(pa[:, kk])
            o += a @ read_mn_major(smem, desc_at(v_lo, kk * 16 * 128), d)
            lsum += a @ read_k_major(smem, ones_desc, 8).T
        g["o"] += deal(o)
        g["l"] += deal(lsum)[:, 0]

    def attend_tile(g, q_lo, k_lo, v_lo, t0, place, scale):
        s = np.zeros((64, BN))
        for kc in range(d // 16):
            in_row = (kc % 4) * 32
            qd = desc_at(q_lo, (kc // 4) * TILE_M * 128 + in_row)
            kd = desc_at(k_lo, (kc // 4) * BN * 128 + in_row)
            s += read_k_major(smem, qd, 64) @ read_k_major(smem, kd, BN).T
        if g["pending"] is not None:  # the wait for S completes the deferred P V
            issue_pv(g, *g["pending"])
            g["pending"] = None
        s = deal(s.astype(np.float32))
        prefix, m_rows, group, fg = place
        pa = np.empty((4, BN // 16, 4, 32, 2), np.float32)
        for w in range(4):
            fw = fg + 16 * w
            wmin = prefix + min(fw, m_rows - 1) // group
            if t0 + BN - 1 > wmin:  # the warp masks
                f = fw + LG
                p = [prefix + np.minimum(f + 8 * h, m_rows - 1) // group for h in range(2)]
                for n in range(BN // 8):
                    for e in range(4):
                        col = t0 + 2 * LQ + n * 8 + (e & 1)
                        s[w, n, :, e] = np.where(col > p[e // 2], -np.inf, s[w, n, :, e])
            t = [quad_reduce(s[w, :, :, 2 * h:2 * h + 2].max(axis=(0, 2)), np.max) * np.float32(scale)
                 for h in range(2)]
            up = [t[h] > g["m"][w, h] + np.float32(MARGIN) for h in range(2)]
            if np.any(up[0] | up[1]):
                stats["rescales"] += 1
                for h in range(2):
                    with np.errstate(invalid="ignore"):
                        alpha = np.where(up[h], np.exp2(g["m"][w, h] - t[h]), 1).astype(np.float32)
                    g["m"][w, h] = np.where(up[h], t[h], g["m"][w, h])
                    g["o"][w, :, :, 2 * h:2 * h + 2] *= alpha[None, :, None]
                    g["l"][w, :, 2 * h:2 * h + 2] *= alpha[:, None]
            else:
                stats["kept"] += 1
            for h in range(2):
                ref = np.where(g["m"][w, h] == -np.inf, 0, g["m"][w, h]).astype(np.float32)
                arg = (s[w, :, :, 2 * h:2 * h + 2].astype(np.float64) * scale -
                       ref[None, :, None]).astype(np.float32)
                s[w, :, :, 2 * h:2 * h + 2] = np.exp2(arg)
            assert np.all(s[w] <= 2.0**MARGIN * (1 + 1e-6)), "a weight past 2^8"
            for kk in range(BN // 16):
                pa[w, kk, 0] = bf16(s[w, 2 * kk][:, 0:2])
                pa[w, kk, 1] = bf16(s[w, 2 * kk][:, 2:4])
                pa[w, kk, 2] = bf16(s[w, 2 * kk + 1][:, 0:2])
                pa[w, kk, 3] = bf16(s[w, 2 * kk + 1][:, 2:4])
        g["pending"] = (v_lo, pa)

    def store(r, kvh, g, m_rows):
        for w in range(4):
            fw = g["fg"] + 16 * w
            if fw >= m_rows:
                continue
            for h in range(2):
                # Every column of the ones accumulator holds the row's sum.
                lq = g["l"][w, :, 2 * h:2 * h + 2]
                assert np.allclose(lq[:, 0], quad_reduce(lq[:, 0], np.max))
                f = fw + LG + 8 * h
                for lane in range(32):
                    if f[lane] >= m_rows:
                        continue
                    token = int(c.qo[r]) + f[lane] // c.group
                    head = kvh * c.group + f[lane] % c.group
                    for dn in range(d // 8):
                        col = dn * 8 + 2 * (lane % 4)
                        out[token, head, col:col + 2] = g["o"][w, dn, lane, 2 * h:2 * h + 2] / lq[lane, 0]
                    if lane % 4 == 0:
                        writes[token, head] += 1

    for kvh, r, m_rows, f0, prefix in tile_items(c, TILE_M):

        def pos_of(f):
            return prefix + min(f, m_rows - 1) // c.group

        n_kt = pos_of(f0 + TILE_M - 1) // BN + 1
        load_tile(r, kvh, 0, k0, v0)
        stage_q(r, kvh, f0, m_rows)
        groups = []
        for wg in range(2):
            fg = f0 + wg * GROUP_M
            groups.append(dict(
                fg=fg, gmax=pos_of(fg + GROUP_M - 1) if fg < m_rows else -1,
                o=np.zeros((4, d // 8, 32, 4), np.float32), m=np.full((4, 2, 32), -np.inf, np.float32),
                l=np.zeros((4, 32, 4), np.float32), pending=None))
        for kt in range(n_kt):
            buf, nxt = (kt % stages) * kv_bytes, ((kt + 1) % stages) * kv_bytes
            if kt + 1 < n_kt:  # lands before tile kt computes: the worst case
                load_tile(r, kvh, (kt + 1) * BN, k0 + nxt, v0 + nxt)
            t0 = kt * BN
            for wg, g in enumerate(groups):
                if t0 <= g["gmax"]:
                    attend_tile(g, desc_lo(wg * GROUP_M * 128, 16), desc_lo(k0, 16) + (buf >> 4),
                                desc_lo(v0, BN * 128) + (buf >> 4), t0,
                                (prefix, m_rows, c.group, g["fg"]), abs(c.scale_log2))
                elif g["pending"] is not None:
                    issue_pv(g, *g["pending"])
                    g["pending"] = None
        for g in groups:
            if g["pending"] is not None:
                issue_pv(g, *g["pending"])
                g["pending"] = None
            store(r, kvh, g, m_rows)
    return out, writes


def check(c):
    stats = {"rescales": 0, "kept": 0}
    out, writes = run(c, stats)
    expect_output(f"{c.name} (wgmma_lean; warp tiles rescaled {stats['rescales']}, kept "
                  f"{stats['kept']})", out, writes, reference(c))


CASES = [
    ("d128 group 4 ps16 1x300", 128, 4, 1, 16, [(0, 300)]),
    ("d64 group 1 ps64 mixed", 64, 1, 2, 64, [(0, 200), (3, 1), (0, 70), (199, 5)]),
    ("d128 group 6 ps16 resume", 128, 6, 1, 16, RESUME[1:]),
    ("d64 group 8 ps16 resume", 64, 8, 1, 16, RESUME),
    ("d64 group 2 ps8 negative scale", 64, 2, 2, 8, [(3, 40), (0, 17), (11, 1)], -0.2),
    ("d128 group 1 ps256", 128, 1, 1, 256, [(20, 270), (300, 40)]),
    ("d128 group 2 ps32 large scale", 128, 2, 1, 32, [(0, 260), (130, 9)], 1.0),
]

if __name__ == "__main__":
    import sys

    # An argument picks the cases whose name contains it.
    for seed, spec in enumerate(CASES, 1):
        if len(sys.argv) < 2 or sys.argv[1] in spec[0]:
            check(case(*spec[:6], seed, *spec[6:]))
