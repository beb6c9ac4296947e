"""The fused split merge (attention_merge::fused) checked on the host:
attend_merge_math.cuh's arithmetic transliterated in float32 for both of
its callers, the block merge kernel (merge_splits_block: thread i weighs
partial i, block_max, each warp's xor butterfly then merge_denominator,
warp w's output sum over partials w, w + 4, ..., merge_result) and the
fused merge's warp a head (merge_head_warp: lane l weighs partials l +
32j, the four output sums of each element kept by its lane, batches of
`Batch` partials with partial k into sum k % 4 and its weight shuffled
from lane k % 32, passes of E elements). Fused multiply-adds are emulated
(float64 product and sum, rounded once to float32; both paths share the
emulation, what is checked is that they do the same operations in the
same order). Checks, bit for bit on random partials (empty ones m = -inf,
l = 0 among them, 0 to 128 used partials): the fused merge equals the
block merge for head_dim 64 / 128 / 256 and every (E, Batch) the kernels
instantiate; merge_denominator equals block_sum's second butterfly (lanes
0-3 the warp sums, the rest 0) as the old kernel computed it. Then the
arrival counters: every split walk's items (attend_split and mma: row, kv
head, head chunk; rows_mma: row, block of kv heads) over ragged rows (and
a row without positions), blocks arriving in random orders with
atomicInc's wrap: exactly one block an item sees the last arrival, the
counter index (token * Hq + first head) is unique and below rows * Hq,
chunk 0 of an empty row merges alone, and every counter is 0 after each
of three launches. Keep it in step with attend_merge_math.cuh.

  python3 bench/split_merge_fused_trace.py   (needs numpy; seconds)
"""

import numpy as np

F = np.float32
MAX_SPLITS, SUMS = 128, 4


def fma(a, b, c):
    return F(np.float64(a) * np.float64(b) + np.float64(c))


def weight(mi, top):
    """merge_weight."""
    return F(0.0) if mi == -np.inf else F(np.exp2(F(mi - top)))


def butterfly(vals):
    """group_sum over 32 lanes (xor 16, 8, 4, 2, 1); every lane's result."""
    v = [F(x) for x in vals]
    for off in (16, 8, 4, 2, 1):
        v = [F(v[i] + v[i ^ off]) for i in range(32)]
    return v


def denominator(w):
    """merge_denominator."""
    return F(F(w[0] + w[2]) + F(w[1] + w[3]))


def result(o, s):
    """merge_result."""
    r = F(0.0)
    for c in range(SUMS):
        r = F(r + o[c])
    return F(r / s) if s != 0 else (F(np.nan) if r == 0 else F(np.copysign(np.inf, r)))


def block_merge(m, l, acc, used, d):
    """merge_splits_block for one (row, head): acc [splits][d]."""
    mi = [F(m[i]) if i < used else F(-np.inf) for i in range(MAX_SPLITS)]
    top = max(mi)
    f = [weight(x, top) for x in mi]
    terms = [F(l[i] * f[i]) if i < used else F(0.0) for i in range(MAX_SPLITS)]
    warp_sums = [butterfly(terms[32 * w:32 * w + 32])[0] for w in range(SUMS)]
    s = denominator(warp_sums)
    # The old kernel's block_sum: lanes 0-3 the warp sums, the rest 0.
    old = butterfly(warp_sums + [F(0.0)] * 28)
    assert all(x.tobytes() == s.tobytes() for x in old), (old[0], s)
    per_lane = d // 32
    red = np.zeros((SUMS, d), F)
    for w in range(SUMS):
        for lane in range(32):
            o = [F(0.0)] * per_lane
            for k in range(w, used, SUMS):
                for e in range(per_lane):
                    o[e] = fma(f[k], acc[k][lane * per_lane + e], o[e])
            red[w, lane * per_lane:(lane + 1) * per_lane] = o
    return np.array([result(red[:, i], s) for i in range(d)], F)


def fused_merge(m, l, acc, used, d, e_pass, batch):
    """merge_head_warp for one head, lane by lane."""
    assert batch % SUMS == 0 and 32 % batch == 0
    mi = [[F(m[lane + 32 * j]) if lane + 32 * j < used else F(-np.inf) for j in range(4)]
          for lane in range(32)]
    top = max(max(x) for x in mi)  # fmaxf per lane, then group_max: exact
    f = [[weight(mi[lane][j], top) for j in range(4)] for lane in range(32)]
    warp_sum = []
    for j in range(4):
        terms = [F(l[lane + 32 * j] * f[lane][j]) if lane + 32 * j < used else F(0.0)
                 for lane in range(32)]
        warp_sum.append(butterfly(terms)[0])
    s = denominator(warp_sum)
    per_lane = d // 32
    out = np.full(d, np.nan, F)
    for lane in range(32):
        for p in range(per_lane // e_pass):
            d0 = lane * per_lane + p * e_pass
            o = [[F(0.0)] * e_pass for _ in range(SUMS)]
            for k0 in range(0, used, batch):
                j = k0 // 32
                for b in range(batch):
                    k = k0 + b
                    wk = f[k % 32][j]  # __shfl_sync(fj, k % 32): lane k % 32's f[j]
                    if k < used:
                        for e in range(e_pass):
                            o[b % SUMS][e] = fma(wk, acc[k][d0 + e], o[b % SUMS][e])
            for e in range(e_pass):
                out[d0 + e] = result([o[c][e] for c in range(SUMS)], s)
    return out


def check_arithmetic(rng):
    # (E, Batch) of mma (D 64 / 128 / 256: (2, 16), (4, 16), (4, 4)),
    # rows_mma ((2, 16), (4, 8)) and the register walk ((2, 4)), and one more.
    shapes = {64: [(2, 16), (2, 4)], 128: [(4, 16), (4, 8), (2, 4)],
              256: [(4, 8), (4, 4), (2, 4)]}
    n = 0
    for d, forms in shapes.items():
        for used in (0, 1, 2, 3, 4, 5, 31, 32, 33, 64, 100, 128):
            m = rng.normal(0, 4, MAX_SPLITS).astype(F)
            l = rng.uniform(0.5, 40, MAX_SPLITS).astype(F)
            acc = rng.normal(0, 10, (MAX_SPLITS, d)).astype(F)
            for k in rng.choice(MAX_SPLITS, 5, replace=False):
                m[k], l[k], acc[k] = -np.inf, 0.0, 0.0  # empty partials
            want = block_merge(m, l, acc, used, d)
            for e_pass, batch in forms:
                got = fused_merge(m, l, acc, used, d, e_pass, batch)
                assert got.tobytes() == want.tobytes(), (d, used, e_pass, batch)
                n += 1
    print(f"arithmetic: fused == block bit for bit in {n} (head_dim, used, E, Batch) cases")


def chunk_length(positions, splits, min_length, step):
    share = max(-(-positions // splits), min_length)
    return -(-share // step) * step


def used_chunks(positions, splits, min_length, step):
    if positions <= 0:
        return 0
    return -(-positions // chunk_length(positions, splits, min_length, step))


def items(walk, rows, kv_heads, group):
    """(row, first query head, heads) of each split item of `walk`: the
    register walk's GC (with_shape: 1, 2, else 4), the tensor-core walks'
    decode_mma_heads (4 up to groups of 4, else 8), rows_mma's blocks of
    kv heads (decode_rows_mma_shape_of: as many as 8 warps hold, dividing
    the kv heads)."""
    gc = (group if group <= 2 else 4) if walk == "registers" else (4 if group <= 4 else 8)
    chunks = -(-group // gc)
    if walk == "rows_mma":
        kv = min(kv_heads, 8 // chunks)
        while kv_heads % kv:
            kv -= 1
        return [(r, kb * kv * group, kv * group) for r in range(rows)
                for kb in range(kv_heads // kv)]
    return [(r, kvh * group + hc * gc, min(gc, group - hc * gc)) for r in range(rows)
            for kvh in range(kv_heads) for hc in range(chunks)]


def check_counters(rng):
    n = 0
    for walk in ("registers", "mma", "rows_mma"):
        for kv_heads, group in ((8, 4), (4, 1), (2, 8), (1, 16), (3, 3)):
            rows = int(rng.integers(1, 17))
            lengths = [0, 1, 5] + list(rng.integers(1, 3000, rows))
            lengths = lengths[:rows]
            q_heads = kv_heads * group
            splits = int(rng.integers(2, 129))
            step, min_length = (64, 128) if walk != "registers" else (8, 32)
            its = items(walk, rows, kv_heads, group)
            index = [r * q_heads + h0 for r, h0, _ in its]
            assert len(set(index)) == len(index) and max(index) < rows * q_heads
            heads = sorted(h for r, h0, c in its if r == 0 for h in range(h0, h0 + c))
            assert heads == list(range(q_heads)), (walk, heads)
            counters = np.zeros(rows * q_heads, np.uint32)
            for _ in range(3):
                merged = {}
                blocks = [(i, c) for i in range(len(its)) for c in range(splits)]
                rng.shuffle(blocks)
                for i, chunk in blocks:
                    r = its[i][0]
                    used = used_chunks(lengths[r], splits, min_length, step)
                    begin = chunk * chunk_length(lengths[r], splits, min_length, step) \
                        if lengths[r] > 0 else 0
                    if begin >= lengths[r]:
                        if chunk == 0:  # a row without positions
                            assert used == 0
                            merged[i] = merged.get(i, 0) + 1
                        continue
                    ctr = index[i]
                    old = counters[ctr]
                    counters[ctr] = 0 if old >= used - 1 else old + 1  # atomicInc
                    if old == used - 1:
                        merged[i] = merged.get(i, 0) + 1
                assert all(merged.get(i, 0) == 1 for i in range(len(its))), walk
                assert not counters.any()
                n += 1
    print(f"counters: one merge an item, all zero after, in {n} launches")


def main():
    rng = np.random.default_rng(7)
    check_arithmetic(rng)
    check_counters(rng)


if __name__ == "__main__":
    main()
