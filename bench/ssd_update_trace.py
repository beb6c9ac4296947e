"""The warp-a-state-row SSD decode kernel's lane logic checked on the host:
ssd_update_rows_kernel (kernels/cuda/internal/ssd_update.cuh)
transliterated for one block at a time, every thread of the block at once
(lists over threads), in float64 with no dependencies. Shuffles act as the
hardware's do (__shfl_xor_sync with a width: lane l reads lane l ^ off of
its own segment). Each thread reads and writes only its own state float4s
(counted: every element of a carried row's [H][P][N] state read once and
written once, a fresh row's written once and never read, a skipped row's
left alone; every output written by exactly one lane); outputs and the new
state must match the step computed plainly (1e-12). Every shape of
ssd_update.cu's table from entry 1 on (`SHAPES`) at N 128 and 64 and the
head dims it takes there. Keep it in step with the kernel when its
indexing changes.

  python3 bench/ssd_update_trace.py      (pure Python, a few seconds)
"""

import math
import random

# (variant, cols, threads, rows): ssd_update.cu's shapes (the streaming
# hints and register caps change no result).
SHAPES = [
    (1, 1, 32, 8),
    (2, 1, 32, 8),
    (3, 1, 32, 4),
    (4, 1, 32, 4),
    (5, 1, 32, 2),
    (6, 1, 64, 8),
    (7, 1, 128, 4),
    (8, 2, 32, 4),
    (9, 1, 32, 8),
    (10, 1, 32, 8),
    (11, 1, 32, 16),
    (12, 1, 32, 1),
]


def halving_sums(xs, lanes, tid):
    """common.cuh's halving_sums over a block: xs[t] is thread t's list."""
    n_vals = len(xs[0])
    n = n_vals
    off = lanes // 2
    while off > 0:
        new = [list(x) for x in xs]
        for t in range(len(xs)):
            lane = tid[t] % lanes
            partner_lane = lane ^ off
            partner = t - lane + partner_lane  # same segment of `lanes`
            if n > 1:
                upper = (lane & off) != 0
                p_upper = (partner_lane & off) != 0
                for i in range(n // 2):
                    keep = xs[t][i + n // 2] if upper else xs[t][i]
                    # the partner sends what it does not keep
                    send = xs[partner][i] if p_upper else xs[partner][i + n // 2]
                    new[t][i] = keep + send
            else:
                new[t][0] = xs[t][0] + xs[partner][0]
        xs = new
        if n > 1:
            n //= 2
        off //= 2
    return xs


def softplus_dt(raw, dt_min, dt_max):
    sp = raw if raw > 20.0 else math.log1p(math.exp(raw))
    return min(max(sp, dt_min), dt_max)


def run_shape(rng, shape, heads, head_dim, n, groups, batch):
    variant, cols, threads, rows = shape
    n4 = n // 4
    lanes = n4 // cols
    assert lanes * cols == n4 and lanes <= 32
    grp = threads // lanes
    block_rows = grp * rows
    if head_dim % block_rows != 0:
        return False  # the launcher runs entry 0
    hpg = heads // groups
    pool = batch + 3
    slots = [-1 if r % 5 == 1 else (5 * r + 4) % pool for r in range(batch)]
    has = [0 if r % 4 == 2 else 1 for r in range(batch)]
    dt_bias = [rng.uniform(-1, 1) for _ in range(heads)]
    a_log = [rng.uniform(-1, 1.5) for _ in range(heads)]
    d = [rng.uniform(-1, 1) for _ in range(heads)]
    x = [[rng.uniform(-2, 2) for _ in range(heads * head_dim)] for _ in range(batch)]
    dt_raw = [[rng.uniform(-2, 2) for _ in range(heads)] for _ in range(batch)]
    bb = [[rng.uniform(-2, 2) for _ in range(groups * n)] for _ in range(batch)]
    cc = [[rng.uniform(-2, 2) for _ in range(groups * n)] for _ in range(batch)]
    slot_elems = heads * head_dim * n
    state = [rng.uniform(-0.5, 0.5) for _ in range(pool * slot_elems)]
    dt_min, dt_max = 1e-3, 10.0

    # Plain step (kernels/cpu/ssd.cpp).
    ref_state = list(state)
    ref_y = [[0.0] * (heads * head_dim) for _ in range(batch)]
    for b in range(batch):
        if slots[b] < 0:
            continue
        base = slots[b] * slot_elems
        if has[b] == 0:
            for i in range(slot_elems):
                ref_state[base + i] = 0.0
        for h in range(heads):
            dt = softplus_dt(dt_raw[b][h] + dt_bias[h], dt_min, dt_max)
            decay = math.exp(dt * -math.exp(a_log[h]))
            g = h // hpg
            for p in range(head_dim):
                xv = x[b][h * head_dim + p]
                acc = 0.0
                for k in range(n):
                    i = base + (h * head_dim + p) * n + k
                    ref_state[i] = decay * ref_state[i] + dt * xv * bb[b][g * n + k]
                    acc += ref_state[i] * cc[b][g * n + k]
                ref_y[b][h * head_dim + p] = acc + d[h] * xv

    # The kernel, block by block.
    got = list(state)
    reads = [0] * len(state)
    writes = [0] * len(state)
    y = [[None] * (heads * head_dim) for _ in range(batch)]
    y_writes = [[0] * (heads * head_dim) for _ in range(batch)]
    for b in range(batch):
        for h in range(heads):
            for bx in range(head_dim // block_rows):
                tid = list(range(threads))
                lane = [t % lanes for t in tid]
                p0 = [bx * block_rows + t // lanes for t in tid]
                slot = slots[b]
                carried = has[b] != 0
                xs = [[x[b][h * head_dim + p0[t] + m * grp] for m in range(rows)] for t in tid]
                raw = dt_raw[b][h] + dt_bias[h]
                g = h // hpg
                ybase = h * head_dim
                if slot < 0:
                    for t in tid:
                        if lane[t] == 0:
                            for m in range(rows):
                                y[b][ybase + p0[t] + m * grp] = 0.0
                                y_writes[b][ybase + p0[t] + m * grp] += 1
                    continue
                # float4 index of each thread's first float4
                first = [((slot * heads + h) * head_dim + p0[t]) * n4 + lane[t] for t in tid]
                s = []
                for t in tid:
                    rows_s = []
                    for m in range(rows):
                        cs = []
                        for j in range(cols):
                            f4 = first[t] + m * grp * n4 + j * lanes
                            if carried:
                                v = [got[4 * f4 + e] for e in range(4)]
                                for e in range(4):
                                    reads[4 * f4 + e] += 1
                            else:
                                v = [0.0] * 4
                            cs.append(v)
                        rows_s.append(cs)
                    s.append(rows_s)
                dt = softplus_dt(raw, dt_min, dt_max)
                decay = math.exp(dt * -math.exp(a_log[h]))
                acc = []
                for t in tid:
                    a_t = []
                    for m in range(rows):
                        dtx = dt * xs[t][m]
                        a = d[h] * xs[t][m] if lane[t] == 0 else 0.0
                        for j in range(cols):
                            c = lane[t] + j * lanes
                            bv = bb[b][g * n + 4 * c : g * n + 4 * c + 4]
                            cv = cc[b][g * n + 4 * c : g * n + 4 * c + 4]
                            v = [dtx * bv[e] + decay * s[t][m][j][e] for e in range(4)]
                            f4 = first[t] + m * grp * n4 + j * lanes
                            for e in range(4):
                                got[4 * f4 + e] = v[e]
                                writes[4 * f4 + e] += 1
                                a += v[e] * cv[e]
                        a_t.append(a)
                    acc.append(a_t)
                acc = halving_sums(acc, lanes, tid)
                held = rows // lanes if rows >= lanes else 1
                share = 1 if rows >= lanes else lanes // rows
                for t in tid:
                    if lane[t] % share == 0:
                        r0 = lane[t] * rows // lanes
                        for i in range(held):
                            idx = ybase + p0[t] + (r0 + i) * grp
                            y[b][idx] = acc[t][i]
                            y_writes[b][idx] += 1

    # Every output once; state touched exactly as the row's kind says.
    for b in range(batch):
        assert all(c == 1 for c in y_writes[b]), (variant, b, "outputs written")
        for i in range(heads * head_dim):
            want = 0.0 if slots[b] < 0 else ref_y[b][i]
            assert abs(y[b][i] - want) < 1e-12 * max(1.0, abs(want)), (variant, b, i)
    owner = {}
    for b in range(batch):
        if slots[b] >= 0:
            owner[slots[b]] = b
    for sl in range(pool):
        for i in range(sl * slot_elems, (sl + 1) * slot_elems):
            if sl not in owner:
                assert reads[i] == 0 and writes[i] == 0, (variant, "spare slot touched")
                continue
            b = owner[sl]
            assert writes[i] == 1, (variant, "state written once")
            assert reads[i] == (1 if has[b] else 0), (variant, "state read")
            assert abs(got[i] - ref_state[i]) < 1e-12 * max(1.0, abs(ref_state[i])), (
                variant,
                "state",
            )
    return True


def main():
    rng = random.Random(5)
    # (heads, head_dim, n, groups); batch 3: a carried, a skipped, a fresh row.
    geometries = [(2, 64, 128, 1), (2, 128, 128, 2), (2, 64, 64, 1), (1, 16, 64, 1), (1, 32, 128, 1)]
    for shape in SHAPES:
        ran = []
        for heads, head_dim, n, groups in geometries:
            if run_shape(rng, shape, heads, head_dim, n, groups, 3):
                ran.append(f"P{head_dim}/N{n}")
        print(f"variant {shape[0]:2d}: ok ({', '.join(ran)})")


if __name__ == "__main__":
    main()
