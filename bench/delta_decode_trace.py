"""The reduced-register decode kernel's lane logic checked on the host:
gated_delta_decode_kernel (kernels/cuda/internal/delta_rule_decode.cuh)
transliterated for one block at a time, every thread of the block at once
(lists over threads), in float64 with no dependencies. Shuffles act as the
hardware's do (__shfl_xor_sync: lane l reads lane l ^ off; __shfl_sync with
a width: lane l reads lane src of its own segment); shared memory is a
per-warp list the warp's lanes fill, read back at the lanes' own float4.
Each thread reads and writes only its own state float4s (counted: every
element of the head's [V][K] state read once and written once, every
output written by exactly one lane); outputs and the new state must match
the rule computed plainly (1e-12). Every shape of decode_table's entries 14
on (`SHAPES`, as delta_rule.cu lists them) at K 128, and at K 16 / 32 / 64 /
256 with V 64 (the dispatch's other lane counts). Keep it in step with the
kernel when its indexing changes.

  python3 bench/delta_decode_trace.py      (pure Python, a few seconds)
"""

import math
import random

# (variant, cols, threads, rows, shared_qk, split_sums): delta_rule.cu's
# shapes (the streaming hints, register caps and launch kind change no
# result).
SHAPES = [
    (14, 16, 32, 2, True, False),
    (15, 16, 32, 2, True, False),
    (16, 16, 64, 2, True, False),
    (17, 16, 32, 4, True, True),
    (18, 16, 64, 4, True, True),
    (19, 16, 32, 2, True, False),
    (20, 16, 32, 2, True, True),
    (21, 4, 32, 8, False, True),
    (22, 4, 32, 8, False, False),
    (23, 4, 32, 8, False, True),
    (24, 4, 32, 4, False, True),
    (25, 4, 64, 4, False, True),
    (26, 8, 32, 4, False, True),
    (27, 4, 32, 8, False, True),
    (28, 16, 64, 1, True, True),
    (29, 16, 32, 2, True, True),
    (30, 16, 32, 8, True, True),
    (31, 16, 32, 2, True, True),
    (32, 16, 32, 2, True, True),
]


def decode_lanes(k_lanes, cols):
    return max(1, min(32, 16 * k_lanes // cols))


def dot4(x, y, acc):
    for a, b in zip(x, y):
        acc += a * b
    return acc


class Block:
    """One block's threads: per-thread values are lists of length `threads`."""

    def __init__(self, threads):
        self.n = threads

    def shfl_xor(self, vals, off, width):
        assert off < width <= 32
        return [vals[t ^ off] for t in range(self.n)]

    def shfl(self, vals, src, width):
        return [vals[(t // width) * width + src % width] for t in range(self.n)]

    def group_sum(self, vals, width):
        off = width // 2
        while off > 0:
            other = self.shfl_xor(vals, off, width)
            vals = [a + b for a, b in zip(vals, other)]
            off //= 2
        return vals


def halving_sums(blk, x, lanes, lane):
    """x: N lists over threads; mirrors detail::halving_sums."""
    n_total = len(x)
    n = n_total
    off = lanes // 2
    while off > 0:
        if n > 1:
            upper = [(lane[t] & off) != 0 for t in range(blk.n)]
            for i in range(n_total // 2):
                if i < n // 2:
                    keep = [x[i + n // 2][t] if upper[t] else x[i][t] for t in range(blk.n)]
                    send = [x[i][t] if upper[t] else x[i + n // 2][t] for t in range(blk.n)]
                    got = blk.shfl_xor(send, off, lanes)
                    x[i] = [a + b for a, b in zip(keep, got)]
            n //= 2
        else:
            got = blk.shfl_xor(x[0], off, lanes)
            x[0] = [a + b for a, b in zip(x[0], got)]
        off //= 2


def run_block(shape, k_lanes, bx, st, q, k, v, scal, out, reads, writes, out_writes):
    """One block (x = bx) of one (row, head): st is the head's [V][K] state
    (updated in place), q / k the head's K floats, v its V floats."""
    _, cols, threads, rows, shared_qk, split_sums = shape
    lanes = decode_lanes(k_lanes, cols)
    chunks = 4 * k_lanes // lanes
    groups = threads // lanes
    k4 = 4 * k_lanes
    assert lanes * chunks == k4
    blk = Block(threads)
    tids = range(threads)
    lane = [t % lanes for t in tids]
    v0 = [bx * groups * rows + t // lanes for t in tids]
    warp = [t // 32 for t in tids]
    warp_lane = [t % 32 for t in tids]

    def f4(vec, c):
        return vec[4 * c:4 * c + 4]

    # state in
    s = [[None] * chunks for _ in range(rows)]
    for m in range(rows):
        for j in range(chunks):
            col = []
            for t in tids:
                vi, c = v0[t] + m * groups, lane[t] + j * lanes
                for e in range(4):
                    reads[vi][4 * c + e] += 1
                col.append(list(st[vi][4 * c:4 * c + 4]))
            s[m][j] = col
    # q, k, norms
    if shared_qk:
        staged = {}
        kq = [0.0] * threads
        kk = [0.0] * threads
        qq = [0.0] * threads
        for i0 in range(0, k4, 32):
            for t in tids:
                i = i0 + warp_lane[t]
                if i < k4:
                    qv, kv = f4(q, i), f4(k, i)
                    kq[t] = dot4(kv, qv, kq[t])
                    kk[t] = dot4(kv, kv, kk[t])
                    qq[t] = dot4(qv, qv, qq[t])
                    staged[(warp[t], 0, i)] = qv
                    staged[(warp[t], 1, i)] = kv
        kq, kk, qq = (blk.group_sum(x, 32) for x in (kq, kk, qq))

        def key(j):
            return [staged[(warp[t], 1, lane[t] + j * lanes)] for t in tids]

        def query(j):
            return [staged[(warp[t], 0, lane[t] + j * lanes)] for t in tids]
    else:
        qr = [[f4(q, lane[t] + j * lanes) for t in tids] for j in range(chunks)]
        kr = [[f4(k, lane[t] + j * lanes) for t in tids] for j in range(chunks)]
        kq = [0.0] * threads
        kk = [0.0] * threads
        qq = [0.0] * threads
        for j in range(chunks):
            for t in tids:
                kq[t] = dot4(kr[j][t], qr[j][t], kq[t])
                kk[t] = dot4(kr[j][t], kr[j][t], kk[t])
                qq[t] = dot4(qr[j][t], qr[j][t], qq[t])
        kq, kk, qq = (blk.group_sum(x, lanes) for x in (kq, kk, qq))

        def key(j):
            return kr[j]

        def query(j):
            return qr[j]

    decay, beta, scale = scal
    inv_k = [1.0 / math.sqrt(x + 1e-6) for x in kk]
    inv_q = [scale / math.sqrt(x + 1e-6) for x in qq]
    sums = [[0.0] * threads for _ in range(2 * rows)]
    for j in range(chunks):
        kj, qj = key(j), query(j)
        for m in range(rows):
            for t in tids:
                sums[m][t] = dot4(s[m][j][t], kj[t], sums[m][t])
                sums[rows + m][t] = dot4(s[m][j][t], qj[t], sums[rows + m][t])

    def delta(t, sk, sq, vv):
        u = beta * (vv - decay * sk * inv_k[t])
        o = (decay * sq + u * kq[t] * inv_k[t]) * inv_q[t]
        return u * inv_k[t], o

    uk = [None] * rows
    if split_sums:
        pairs = rows if lanes == 1 else (2 * rows // lanes if 2 * rows > lanes else 1)
        halving_sums(blk, sums, lanes, lane)
        across = [lane[t] % (lanes // 2 if lanes > 1 else 1) for t in tids]
        m0 = [across[t] * 2 * rows // lanes for t in tids]
        lower = [lanes == 1 or lane[t] < lanes // 2 for t in tids]
        writer = [lower[t] and across[t] * 2 * rows % lanes == 0 for t in tids]
        owned = []
        for i in range(pairs):
            if lanes > 1:
                other = blk.shfl_xor(sums[i], lanes // 2, lanes)
                sk = [sums[i][t] if lower[t] else other[t] for t in tids]
                sq = [other[t] if lower[t] else sums[i][t] for t in tids]
            else:
                sk, sq = sums[i], sums[rows + i]
            mine = []
            for t in tids:
                vi = v0[t] + (m0[t] + i) * groups
                d, o = delta(t, sk[t], sq[t], v[vi])
                mine.append(d)
                if writer[t]:
                    out[vi] = o
                    out_writes[vi] += 1
            owned.append(mine)
        for m in range(rows):
            uk[m] = blk.shfl(owned[m % pairs], m * lanes // (2 * rows), lanes)
    else:
        for m in range(rows):
            sk = blk.group_sum(sums[m], lanes)
            sq = blk.group_sum(sums[rows + m], lanes)
            col = []
            for t in tids:
                vi = v0[t] + m * groups
                d, o = delta(t, sk[t], sq[t], v[vi])
                col.append(d)
                if lane[t] == 0:
                    out[vi] = o
                    out_writes[vi] += 1
            uk[m] = col
    for j in range(chunks):
        kj = key(j)
        for m in range(rows):
            for t in tids:
                vi, c = v0[t] + m * groups, lane[t] + j * lanes
                new = [uk[m][t] * kj[t][e] + decay * s[m][j][t][e] for e in range(4)]
                for e in range(4):
                    st[vi][4 * c + e] = new[e]
                    writes[vi][4 * c + e] += 1


def reference(st, q, k, v, scal):
    decay, beta, scale = scal
    nk = 1.0 / math.sqrt(sum(x * x for x in k) + 1e-6)
    nq = scale / math.sqrt(sum(x * x for x in q) + 1e-6)
    kh = [x * nk for x in k]
    qh = [x * nq for x in q]
    new, out = [], []
    for vi, srow in enumerate(st):
        u = beta * (v[vi] - decay * sum(a * b for a, b in zip(srow, kh)))
        row = [decay * a + u * b for a, b in zip(srow, kh)]
        new.append(row)
        out.append(sum(a * b for a, b in zip(row, qh)))
    return new, out


def check(shape, k_lanes, v_dim, rng):
    _, cols, threads, rows, _, _ = shape
    lanes = decode_lanes(k_lanes, cols)
    per_block = threads // lanes * rows
    if v_dim % per_block:
        return "falls back"
    k_dim = 16 * k_lanes
    st = [[rng.uniform(-0.5, 0.5) for _ in range(k_dim)] for _ in range(v_dim)]
    q = [rng.uniform(-1, 1) for _ in range(k_dim)]
    k = [rng.uniform(-1, 1) for _ in range(k_dim)]
    v = [rng.uniform(-1, 1) for _ in range(v_dim)]
    a, b = rng.uniform(-3, 3), rng.uniform(-3, 3)
    x = a + rng.uniform(-1, 1)
    decay = math.exp(-math.exp(rng.uniform(-1, 1)) * (x if x > 20 else math.log1p(math.exp(x))))
    scal = (decay, 1 / (1 + math.exp(-b)), 1 / math.sqrt(k_dim))
    want_st, want_out = reference(st, q, k, v, scal)
    out = [float("nan")] * v_dim
    reads = [[0] * k_dim for _ in range(v_dim)]
    writes = [[0] * k_dim for _ in range(v_dim)]
    out_writes = [0] * v_dim
    for bx in range(v_dim // per_block):
        run_block(shape, k_lanes, bx, st, q, k, v, scal, out, reads, writes, out_writes)
    assert all(c == 1 for row in reads for c in row), "state read other than once"
    assert all(c == 1 for row in writes for c in row), "state written other than once"
    assert all(c == 1 for c in out_writes), "output written other than once"
    err_o = max(abs(a - b) for a, b in zip(out, want_out))
    err_s = max(abs(a - b) for ra, rb in zip(st, want_st) for a, b in zip(ra, rb))
    assert err_o < 1e-12 and err_s < 1e-12, (err_o, err_s)
    return "ok (out %.1e, state %.1e)" % (err_o, err_s)


def main():
    rng = random.Random(1613)
    for shape in SHAPES:
        results = []
        for k_lanes, v_dim in ((8, 128), (1, 64), (2, 64), (4, 64), (16, 64)):
            results.append("K %d: %s" % (16 * k_lanes, check(shape, k_lanes, v_dim, rng)))
        print("variant %d (cols %d, %d threads, %d rows, smem q/k %s, butterfly %s): %s" %
              (*shape, "; ".join(results)))


if __name__ == "__main__":
    main()
