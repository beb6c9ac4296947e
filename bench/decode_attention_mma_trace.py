"""The tensor-core decode attention's lanes checked on the host:
attend_decode_mma (kernels/cuda/attention_decode_mma.cu) transliterated
for one block per item (row, kv head, chunk of GC heads, split), its
shared memory a flat NaN-filled array at the kernel's offsets and strides
(per warp: stages of K and V, the P^T tile; the merge scratch over them).
Each warp's tiles are gathered from a shuffled page table by the kernel's
copy pattern (lane l: position l / 2, every other 16-byte piece from
l % 2; positions past the range zero-filled), in the kernel's issue order
with every copy landing at once (the worst case for stage reuse: tile j +
stages - 1 lands before tile j is consumed). ldmatrix and mma.sync
m16n8k16 come from attention_prefill_trace.py (the PTX ISA's lane layouts);
shuffles are index permutations over the 32 lanes. q and P are split into
bf16 high and low parts as on the GPU. Checks: no NaN (a read of shared
memory nothing wrote), every output (or partial) element written exactly
once, and the outputs (split: the partials merged as merge_splits_block
does) against float64 attention within the CUDA-core walks' budget, 1e-4
normalised. Shapes: head_dim 64 / 128 / 256, groups 1 / 3 / 4 / 8 / 12 /
16, page sizes 4 / 5 / 16, lengths off the tile and the page, one pass and
split. Keep it in step with the kernel when its tiles or layouts change.

  python3 bench/decode_attention_mma_trace.py   (needs numpy; about a minute)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_prefill_trace import bf16, ldmatrix_x4, mma  # noqa: E402

WARPS, TILE, STEP = 4, 16, 64
LANES = np.arange(32)
LG, LQ = LANES // 4, LANES % 4
MIN_CHUNK = 32


def shape(d, gc):
    """mma_shape<D, GC>."""
    stages = 2 if d == 256 else 3
    stride = d + 8
    nt = gc // 4
    half = TILE * stride
    stage = 2 * half
    p_elems = nt * TILE * 8
    return dict(stages=stages, stride=stride, nt=nt, kc=d // 16, half=half, stage=stage,
                warp=stages * stage + p_elems, per_lane=d // 16)


def xor(x, m):
    return x[LANES ^ m]


def ceil_div(a, b):
    return -(-a // b)


class case:
    def __init__(self, name, d, group, kvh, ps, lengths, seed, splits=1):
        rng = np.random.default_rng(seed)
        self.name, self.d, self.group, self.kvh, self.ps = name, d, group, kvh, ps
        self.lengths, self.splits = lengths, splits
        self.q_heads = group * kvh
        self.q = rng.uniform(-2, 2, (len(lengths), self.q_heads, d)).astype(np.float32)
        self.kv_indptr, pages = [0], 0
        for n in lengths:
            pages += ceil_div(n, ps)
            self.kv_indptr.append(pages)
        self.kv_indices = rng.permutation(pages)
        self.arena = bf16(rng.uniform(-2, 2, (2, pages, ps, kvh, d)))
        self.scale_log2 = np.float32(1.0 / np.sqrt(d) * 1.4426950408889634)

    def kv(self, which, r, t, kvh):
        page = self.kv_indices[self.kv_indptr[r] + t // self.ps]
        return self.arena[which, page, t % self.ps, kvh]

    def reference(self):
        out = np.zeros((len(self.lengths), self.q_heads, self.d))
        for r, n in enumerate(self.lengths):
            for h in range(self.q_heads):
                kvh = h // self.group
                k = np.stack([self.kv(0, r, t, kvh) for t in range(n)]).astype(np.float64)
                v = np.stack([self.kv(1, r, t, kvh) for t in range(n)]).astype(np.float64)
                s = k @ (self.q[r, h].astype(np.float64) / np.sqrt(self.d))
                p = np.exp(s - s.max())
                out[r, h] = p @ v / p.sum()
        return out


def chunk_length(positions, splits):
    share = max(ceil_div(positions, splits), MIN_CHUNK)
    return ceil_div(share, STEP) * STEP


def pair(x):
    """[32][2] high and low bf16 parts of float32 pairs [32][2]."""
    hi = bf16(x)
    return hi, bf16(x.astype(np.float32) - hi)


def run_item(c, gc, smem, r, kvh, head_chunk, begin, end):
    """One block's item: per head (of `valid`), (o [D], l, m) merged over warps."""
    S = shape(c.d, gc)
    d, st, nt, stride = c.d, S["stages"], S["nt"], S["stride"]
    h0 = kvh * c.group + head_chunk * gc
    valid = min(gc, c.group - head_chunk * gc)
    # Q^T B fragments qb[k][t] = (b0, b1), each [32][2].
    qb = [[None] * nt for _ in range(S["kc"])]
    for t in range(nt):
        col = t * 8 + LG
        head, low = col % gc, col >= gc
        for k in range(S["kc"]):
            regs = []
            for rr in range(2):
                dims = k * 16 + 2 * LQ + 8 * rr
                x = np.zeros((32, 2), np.float32)
                ok = head < valid
                x[ok, 0] = c.q[r, h0 + head[ok], dims[ok]]
                x[ok, 1] = c.q[r, h0 + head[ok], dims[ok] + 1]
                x = (x * c.scale_log2).astype(np.float32)
                hi, lo = pair(x)
                regs.append(np.where(low[:, None], lo, hi))
            qb[k][t] = regs
    states = []
    tiles = ceil_div(end - begin, TILE)
    for warp in range(WARPS):
        base = warp * S["warp"]
        o = np.zeros((S["kc"], nt, 32, 4))
        m = np.full((32, 2), -np.inf)
        l = np.zeros((32, 2))
        mine = (tiles - warp + WARPS - 1) // WARPS if tiles > warp else 0

        def start(j):
            return begin + (j * WARPS + warp) * TILE

        def issue(j):
            stage = base + j % st * S["stage"]
            t0 = start(j)
            for lane in range(32):
                row = lane // 2
                t = t0 + row
                for cc in range(S["per_lane"]):
                    piece = 2 * cc + lane % 2
                    for which in range(2):
                        dst = stage + which * S["half"] + row * stride + piece * 8
                        smem[dst:dst + 8] = (c.kv(which, r, t, kvh)[piece * 8:piece * 8 + 8]
                                             if t < end else 0.0)

        for k in range(st - 1):
            if k < mine:
                issue(k)
        for j in range(mine):
            if j + st - 1 < mine:
                issue(j + st - 1)  # lands before tile j is read: the worst case
            stage = base + j % st * S["stage"]
            pt = base + st * S["stage"]
            t0 = start(j)
            s = np.zeros((nt, 32, 4))
            for k in range(S["kc"]):
                addr = 2 * (stage + (LANES % 16) * stride + k * 16 + (LANES // 16) * 8)
                ka = ldmatrix_x4(smem, addr)
                for t in range(nt):
                    mma(s[t], ka, qb[k][t][0], qb[k][t][1])
            p = s[0] + xor(s[0], 2) if nt == 1 else s[0] + s[1]
            if t0 + TILE > end:
                p[t0 + LG >= end, 0:2] = -np.inf
                p[t0 + LG + 8 >= end, 2:4] = -np.inf
            alpha = np.zeros((32, 2))
            for h in range(2):
                top = np.maximum(p[:, h], p[:, h + 2])
                for msk in (4, 8, 16):
                    top = np.maximum(top, xor(top, msk))
                mx = np.maximum(m[:, h], top)
                ref = np.where(mx == -np.inf, 0.0, mx)
                alpha[:, h] = np.exp2(m[:, h] - ref)
                m[:, h] = mx
                p[:, h] = np.exp2(p[:, h] - ref)
                p[:, h + 2] = np.exp2(p[:, h + 2] - ref)
                l[:, h] = l[:, h] * alpha[:, h] + p[:, h] + p[:, h + 2]
            smem[pt:pt + nt * TILE * 8] = np.nan
            for t in range(nt):
                low = t * 8 + 2 * LQ >= gc
                for e0, row in ((0, LG), (2, LG + 8)):
                    hi, lo = pair(p[:, e0:e0 + 2].astype(np.float32))
                    val = np.where(low[:, None], lo, hi)
                    at = pt + (t * TILE + row) * 8 + 2 * LQ
                    smem[at] = val[:, 0]
                    smem[at + 1] = val[:, 1]
            regs = ldmatrix_x4(smem, 2 * pt + 16 * ((LANES // 16 % nt) * TILE + LANES % 16),
                               trans=True)
            pb = [(regs[2 * t], regs[2 * t + 1]) for t in range(nt)]
            for i in range(S["kc"]):
                o[i] *= alpha[:, [0, 1, 0, 1]][None]
                addr = 2 * (stage + S["half"] + ((LANES // 16) * 8 + LANES % 8) * stride +
                            i * 16 + (LANES // 8 % 2) * 8)
                va = ldmatrix_x4(smem, addr, trans=True)
                for t in range(nt):
                    mma(o[i, t], va, pb[t][0], pb[t][1])
        for msk in (4, 8, 16):
            l = l + xor(l, msk)
        oc = o[:, 0] + o[:, 0][:, LANES ^ 2] if nt == 1 else o[:, 0] + o[:, 1]
        acc = np.full((gc, d), np.nan)
        for lane in range(32):
            g, qd = lane // 4, lane % 4
            if qd >= gc // 2:
                continue
            for i in range(S["kc"]):
                for e in range(4):
                    acc[2 * qd + e % 2, i * 16 + g + 8 * (e // 2)] = oc[i, lane, e]
        mw = np.empty(gc)
        lw = np.empty(gc)
        for qd in range(gc // 2):
            for h in range(2):
                mw[2 * qd + h] = m[qd, h]  # lane qd: g = 0
                lw[2 * qd + h] = l[qd, h]
        assert np.all(np.isfinite(acc)) or mine == 0, "a read of unwritten shared memory"
        states.append((acc, mw, lw))
    result = []
    for h in range(valid):
        ms = np.array([s_[1][h] for s_ in states])
        top = ms.max()
        o, tl = np.zeros(d), 0.0
        for acc, mw, lw in states:
            if mw[h] == -np.inf:
                continue
            f = np.exp2(mw[h] - top)
            tl += lw[h] * f
            o += acc[h] * f
        result.append((o, tl, top))
    return h0, result


def run(c):
    gc = 4 if c.group <= 4 else 8
    chunks = ceil_div(c.group, gc)
    S = shape(c.d, gc)
    smem = np.full(WARPS * S["warp"], np.nan, np.float32)
    rows = len(c.lengths)
    out = np.full((rows, c.q_heads, c.d), np.nan)
    writes = np.zeros((rows, c.q_heads), int)
    for r, n in enumerate(c.lengths):
        length = chunk_length(n, c.splits) if c.splits > 1 else n
        used = ceil_div(n, length)
        for kvh in range(c.kvh):
            for hc in range(chunks):
                parts = []
                for sp in range(c.splits):
                    begin = sp * length
                    if begin >= n:
                        continue
                    h0, res = run_item(c, gc, smem, r, kvh, hc, begin, min(begin + length, n))
                    parts.append(res)
                assert len(parts) == used
                for h in range(len(parts[0])):
                    top = max(p_[h][2] for p_ in parts)
                    f = [np.exp2(p_[h][2] - top) for p_ in parts]
                    o = sum(fi * p_[h][0] for fi, p_ in zip(f, parts))
                    tl = sum(fi * p_[h][1] for fi, p_ in zip(f, parts))
                    out[r, h0 + h] = o / tl
                    writes[r, h0 + h] += 1
    assert np.all(writes == 1), "an output written other than once"
    ref = c.reference()
    err = np.abs(out - ref).max() / np.abs(ref).max()
    return err


def cases():
    lens = [1, 15, 16, 17, 63, 64, 65, 200, 333]
    return [
        case("d128 group 4 page 16", 128, 4, 2, 16, lens, 1),
        case("d128 group 8 page 5", 128, 8, 1, 5, lens, 2),
        case("d64 group 3 page 4", 64, 3, 2, 4, lens, 3),
        case("d256 group 1 page 16", 256, 1, 2, 16, lens[:6], 4),
        case("d64 group 16 page 16", 64, 16, 1, 16, lens[:5], 5),
        case("d128 group 12 split 4", 128, 12, 1, 16, [1, 100, 700, 1000], 6, splits=4),
        case("d128 group 4 split 64", 128, 4, 1, 16, [2048], 7, splits=64),
    ]


def main():
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    worst = 0.0
    for c in cases():
        if want not in c.name:
            continue
        err = run(c)
        worst = max(worst, err)
        print(f"{c.name:28s} normalised error {err:.2e}")
        assert err <= 1e-4, c.name
    print(f"ok, worst {worst:.2e}")


if __name__ == "__main__":
    main()
