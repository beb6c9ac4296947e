"""The tensor-core whole-row decode kernel's lanes checked on the host:
attend_decode_rows_mma (kernels/cuda/attention_decode_rows_mma.cu,
attention_walk::rows_mma) transliterated, one block per item (row, kv
heads of the block, split), its shared ring a flat NaN-filled array at the
kernel's offsets and padded stride.

Shapes come from decode_rows_mma_shape_of. Per item, in program order:
warp 0's prologue issues, then per tile every warp's consume and the issue
of tile j + stages into the stage just consumed. Every copy is one
position's row (kv_per_block x head bytes) to stage + i x stride (K) or
stage + (tile + i) x stride (V), its source the arena's row of position
t0 + min(i, n - 1) (checked: 16-byte ends and size; the mbarrier's
expected bytes equal the copies'). Every ldmatrix phase (8 lanes, one
8 x 8 matrix) is checked for bank conflicts: its 8 row addresses must fall
on 8 distinct 16-byte bank groups (address / 16 mod 8). ldmatrix and
mma.sync m16n8k16 come from attention_prefill_trace.py (the PTX ISA's
lane layouts), m16n8k8 is written out here the same way; shuffles are
index permutations over the 32 lanes. q and P are split into bf16 high and
low parts as on the GPU. Checks: no NaN reaches an output (a read of
shared memory nothing wrote), every output (or partial) element written
exactly once, and the outputs (split: the partials merged as
merge_splits_block does) against float64 attention within the CUDA-core
walks' budget, 1e-4 normalised; the same with bare bf16 q and P (no low
parts) is printed for comparison. Shapes: head_dim 64 / 128, groups 1 / 3
/ 4 / 8 / 12 / 16 / 64, kv heads 1 / 2 / 8, page sizes 4 / 5 / 16, lengths
off the tile and the page, one pass and split (down to 16-position
chunks: 128 splits of 2,048 positions). Keep it in step with the
kernel.

  python3 bench/decode_attention_rows_mma_trace.py   (needs numpy)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_prefill_trace import bf16, ldmatrix_x4, mma  # noqa: E402

STAGES = 3
STAGE_BUDGET = 33 * 1024
N = 8
MAX_TILE = 64
PAD = 16
MAX_WARPS = 8
MIN_CHUNK = 128  # decode_rows_mma_min_chunk (split_args::min_length)
LOG2E = 1.4426950408889634
LANES = np.arange(32)
LG, LQ = LANES // 4, LANES % 4


def ceil_div(a, b):
    return -(-a // b)


def mma_heads(group):
    """decode_mma_heads."""
    return 4 if group <= 4 else 8


def shape_of(kv_heads, group, d):
    """decode_rows_mma_shape_of."""
    gc = mma_heads(group)
    chunks = ceil_div(group, gc)
    if chunks > MAX_WARPS or d not in (64, 128):
        return None
    kv = min(kv_heads, MAX_WARPS // chunks)
    while kv_heads % kv:
        kv -= 1
    stride = kv * d * 2 + PAD
    tile = max(N, min(STAGE_BUDGET // (2 * stride) // N * N, MAX_TILE))
    return dict(kv=kv, warps=kv * chunks, chunks=chunks, gc=gc, tile=tile, stride=stride,
                row=kv * d * 2, stage=2 * tile * stride, smem=STAGES * 2 * tile * stride)


def chunk_length(positions, splits, step):
    share = max(ceil_div(positions, splits), MIN_CHUNK)
    return ceil_div(share, step) * step


def xor(x, m):
    return x[LANES ^ m]


def shfl(x, src):
    return x[np.broadcast_to(src, (32,))]


def mma_k8(c, a0, a1, b0):
    """c [32][4] += A B, m16n8k8: a0 / a1 / b0 [32][2] registers."""
    A = np.full((16, 8), np.nan, np.float64)
    A[LG, 2 * LQ], A[LG, 2 * LQ + 1] = a0[:, 0], a0[:, 1]
    A[LG + 8, 2 * LQ], A[LG + 8, 2 * LQ + 1] = a1[:, 0], a1[:, 1]
    B = np.full((8, 8), np.nan, np.float64)
    B[2 * LQ, LG], B[2 * LQ + 1, LG] = b0[:, 0], b0[:, 1]
    C = A @ B
    c[:, 0] += C[LG, 2 * LQ]
    c[:, 1] += C[LG, 2 * LQ + 1]
    c[:, 2] += C[LG + 8, 2 * LQ]
    c[:, 3] += C[LG + 8, 2 * LQ + 1]


def check_banks(addr):
    """Every 8-lane phase of an ldmatrix .x4: 8 distinct 16-byte bank groups."""
    for j in range(4):
        groups = (addr[8 * j:8 * j + 8] // 16) % 8
        assert len(set(groups.tolist())) == 8, ("bank conflict", addr[8 * j:8 * j + 8])


def pack(x0, x1):
    """pack_bf16: registers [32][2]."""
    return np.stack([bf16(x0), bf16(x1)], axis=1)


def rest(x0, x1, hi):
    """bf16_rest."""
    return pack(np.float32(x0) - hi[:, 0], np.float32(x1) - hi[:, 1])


class Case:
    def __init__(self, name, d, group, kvh, ps, lengths, seed, splits=1):
        rng = np.random.default_rng(seed)
        self.name, self.d, self.group, self.kvh, self.ps = name, d, group, kvh, ps
        self.splits, self.lengths = splits, lengths
        self.qh = group * kvh
        pages = [ceil_div(n, ps) for n in lengths]
        total = sum(pages) + 3
        self.k = bf16(rng.standard_normal((total, ps, kvh, d)).astype(np.float32))
        self.v = bf16(rng.standard_normal((total, ps, kvh, d)).astype(np.float32))
        order = rng.permutation(total)
        self.table, at = [], 0
        for p in pages:
            self.table.append(order[at:at + p])
            at += p
        self.q = rng.standard_normal((len(lengths), self.qh, d)).astype(np.float32)
        self.scale = 1.0 / np.sqrt(d)


def run_item(c, sh, row, kb, begin, end, smem, lo_parts=True):
    """One block's item: returns {(head, dim): (o, l, m)} for its heads."""
    d, gc, tile, stride = c.d, sh["gc"], sh["tile"], sh["stride"]
    kv0 = kb * sh["kv"]
    tiles = ceil_div(end - begin, tile)
    scale_log2 = np.float32(c.scale * LOG2E)
    pages = c.table[row]

    def issue(j):
        t0 = begin + j * tile
        n = min(tile, end - t0)
        base = (j % STAGES) * sh["stage"]
        copied = 0
        for i in range(2 * tile):
            v = i >= tile
            r = i - tile if v else i
            t = t0 + min(r, n - 1)
            dst = base + i * stride
            assert dst % 16 == 0 and sh["row"] % 16 == 0
            src = (c.v if v else c.k)[pages[t // c.ps], t % c.ps, kv0:kv0 + sh["kv"]]
            smem[dst // 2:dst // 2 + sh["row"] // 2] = src.reshape(-1)
            copied += sh["row"]
        assert copied == 2 * tile * sh["row"]  # mbar_arrive_expect's bytes

    for j in range(min(STAGES, tiles)):
        issue(j)
    out = {}
    states = []
    for warp in range(sh["warps"]):
        hk, hc = warp // sh["chunks"], warp % sh["chunks"]
        h0 = (kv0 + hk) * c.group + hc * gc
        valid = min(gc, c.group - hc * gc)
        head = LG % gc
        qa = np.zeros((d // 16, 4, 32, 2), np.float32)
        for k in range(d // 16):
            for r in range(2):
                x = np.zeros((32, 2), np.float32)
                ok = head < valid
                dims = k * 16 + 2 * LQ + 8 * r
                x[ok, 0] = c.q[row, h0 + head[ok], dims[ok]]
                x[ok, 1] = c.q[row, h0 + head[ok], dims[ok] + 1]
                x *= scale_log2
                hi = pack(x[:, 0], x[:, 1])
                qa[k, 2 * r] = hi
                qa[k, 2 * r + 1] = rest(x[:, 0], x[:, 1], hi) if lo_parts else 0.0
        states.append(dict(qa=qa, o=np.zeros((d // 16, 32, 4)), m=np.full(32, -np.inf),
                           l=np.zeros(32), h0=h0, valid=valid, hk=hk))
    for j in range(tiles):
        base = (j % STAGES) * sh["stage"]
        t0 = begin + j * tile
        for st in states:
            k_base = base + st["hk"] * d * 2
            v_base = k_base + tile * stride
            consume(st, k_base, v_base, stride, tile, t0, end, smem, gc, d, lo_parts)
        if j + STAGES < tiles:  # after the block barrier
            smem[base // 2:(base + sh["stage"]) // 2] = np.nan  # the old bytes gone
            issue(j + STAGES)
    for st in states:
        finish(st, gc, d, out)
    return out


def consume(st, k_base, v_base, stride, tile, t0, end, smem, gc, d, lo_parts):
    row_off = (LANES % 8) * stride + (LANES // 8) * 16
    src0 = 4 * ((2 * LQ) % gc)
    src1 = 4 * ((2 * LQ + 1) % gc)
    for nb in range(0, tile, N):
        off = nb * stride + row_off
        s = np.zeros((32, 4))
        for cc in range(d // 32):
            addr = k_base + off + 64 * cc
            check_banks(addr)
            kb = ldmatrix_x4(smem, addr)
            mma(s, st["qa"][2 * cc], kb[0], kb[1])
            mma(s, st["qa"][2 * cc + 1], kb[2], kb[3])
        p0 = (s[:, 0] + s[:, 2]).astype(np.float32)
        p1 = (s[:, 1] + s[:, 3]).astype(np.float32)
        t = t0 + nb + 2 * LQ
        p0 = np.where(t >= end, -np.inf, p0)
        p1 = np.where(t + 1 >= end, -np.inf, p1)
        top = np.maximum(p0, p1)
        top = np.maximum(top, xor(top, 1))
        top = np.maximum(top, xor(top, 2))
        mx = np.maximum(st["m"], top)
        ref = np.where(mx == -np.inf, 0.0, mx)
        if np.any(mx > st["m"]):
            alpha = np.exp2(st["m"] - ref)
            st["l"] *= alpha
            a0, a1 = shfl(alpha, src0), shfl(alpha, src1)
            st["o"][:, :, 0] *= a0
            st["o"][:, :, 1] *= a1
            st["o"][:, :, 2] *= a0
            st["o"][:, :, 3] *= a1
            st["m"] = mx
        p0 = np.exp2(p0 - ref).astype(np.float32)
        p1 = np.exp2(p1 - ref).astype(np.float32)
        st["l"] += p0.astype(np.float64) + p1
        hi = pack(p0, p1)
        lo = rest(p0, p1, hi) if lo_parts else np.zeros_like(hi)
        if gc == 4:
            pb = [np.where((LG < 4)[:, None], hi, lo)]
        else:
            pb = [hi, lo]
        for cc in range(d // 32):
            addr = v_base + off + 64 * cc
            check_banks(addr)
            va = ldmatrix_x4(smem, addr, trans=True)
            for b in pb:
                mma_k8(st["o"][2 * cc], va[0], va[1], b)
                mma_k8(st["o"][2 * cc + 1], va[2], va[3], b)


def finish(st, gc, d, out):
    lsum = st["l"] + xor(st["l"], 1)
    lsum = lsum + xor(lsum, 2)
    o = st["o"]
    if gc == 4:
        o = o + o[:, LANES ^ 2, :]
    for lane in range(32):
        g, qd = lane // 4, lane % 4
        if gc == 4 and qd >= 2:
            continue
        for cidx in range(2):
            h = (2 * qd + cidx) % gc
            if h >= st["valid"]:
                continue
            m, l = st["m"][4 * h], lsum[4 * h]
            for i in range(d // 16):
                for dim, e in ((16 * i + g, cidx), (16 * i + g + 8, 2 + cidx)):
                    key = (st["h0"] + h, dim)
                    assert key not in out, ("written twice", key)
                    out[key] = (o[i, lane, e], l, m)


def attend(c, lo_parts=True):
    """The kernel's outputs [rows][qh][d] (split: partials merged)."""
    sh = shape_of(c.kvh, c.group, c.d)
    out = np.full((len(c.lengths), c.qh, c.d), np.nan)
    for row, n in enumerate(c.lengths):
        parts = []
        for chunk in range(c.splits):
            if c.splits > 1:
                length = chunk_length(n, c.splits, sh["tile"])
                begin, end = chunk * length, min(chunk * length + length, n)
            else:
                begin, end = 0, n
            if begin >= end:
                continue
            got = {}
            for kb in range(c.kvh // sh["kv"]):
                smem = np.full(STAGES * sh["stage"] // 2, np.nan, np.float32)
                got.update(run_item(c, sh, row, kb, begin, end, smem, lo_parts))
            assert len(got) == c.qh * c.d, "every (head, dim) written once"
            parts.append(got)
        for h in range(c.qh):
            tops = [p[(h, 0)][2] for p in parts]
            top = max(tops)
            lsum = sum(p[(h, 0)][1] * np.exp2(p[(h, 0)][2] - top) for p in parts)
            for dim in range(c.d):
                acc = sum(p[(h, dim)][0] * np.exp2(p[(h, dim)][2] - top) for p in parts)
                out[row, h, dim] = acc / lsum
    return out


def reference(c):
    out = np.zeros((len(c.lengths), c.qh, c.d))
    for row, n in enumerate(c.lengths):
        pages = c.table[row]
        t = np.arange(n)
        k = c.k[pages[t // c.ps], t % c.ps].astype(np.float64)  # [n][kvh][d]
        v = c.v[pages[t // c.ps], t % c.ps].astype(np.float64)
        for h in range(c.qh):
            kvh = h // c.group
            s = k[:, kvh] @ c.q[row, h].astype(np.float64) * c.scale
            w = np.exp(s - s.max())
            out[row, h] = (w @ v[:, kvh]) / w.sum()
    return out


def err(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def main():
    cases = [
        Case("d128 g4 kv8 ps16", 128, 4, 8, 16, [1, 7, 9, 100], 1),
        Case("d128 g4 kv8 ps16 split", 128, 4, 8, 16, [300, 33, 1], 2, splits=5),
        Case("d64 g1 kv8 ps5", 64, 1, 8, 5, [3, 41, 77], 3),
        Case("d64 g3 kv2 ps4 split", 64, 3, 2, 4, [130, 17], 4, splits=3),
        Case("d128 g4 kv8 ps16 16-chunks", 128, 4, 8, 16, [100, 2048], 9, splits=128),
        Case("d128 g8 kv2 ps16", 128, 8, 2, 16, [57, 8], 5),
        Case("d128 g12 kv1 ps5 split", 128, 12, 1, 5, [201, 16], 6, splits=4),
        Case("d64 g16 kv2 ps16", 64, 16, 2, 16, [65, 23], 7),
        Case("d64 g64 kv1 ps4", 64, 64, 1, 4, [19], 8),
    ]
    worst = 0.0
    for c in cases:
        sh = shape_of(c.kvh, c.group, c.d)
        want = reference(c)
        got = attend(c)
        assert not np.isnan(got).any(), c.name
        e = err(got, want)
        bare = err(attend(c, lo_parts=False), want)
        worst = max(worst, e)
        print(f"{c.name:26s} kv/block {sh['kv']} warps {sh['warps']} tile {sh['tile']} "
              f"smem {sh['smem']} B: err {e:.2e} (bare bf16 q, P: {bare:.2e})")
        assert e < 1e-4, (c.name, e)
    for kvh, d in ((8, 128), (8, 64), (4, 128), (2, 64)):
        sh = shape_of(kvh, 4, d)
        print(f"shape kv {kvh} d {d}: tile {sh['tile']}, stride {sh['stride']}, smem "
              f"{sh['smem']} B ({sh['smem'] / 1024:.2f} KiB)")
        assert 2 * (sh["smem"] + 1024) <= 228 * 1024, "2 blocks an SM"
    print(f"ok: worst {worst:.2e}")


if __name__ == "__main__":
    main()
