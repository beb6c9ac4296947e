"""The whole-token-row decode kernel's indexing checked on the host:
attend_decode_rows (kernels/cuda/attention_decode_rows.cu,
attention_walk::rows) transliterated, the block's program order replayed
with warp 0's bulk copies and every warp's reads of the shared ring.

Shapes come from decode_rows_shape_of (kv heads a block, warps, positions a
stage, shared bytes). The arena and the stages are arrays of head vectors
(every copy's ends and size are multiples of a head vector, and of 16
bytes: checked); stages start NaN-filled, so a read of a row nobody copied
shows. Per item, in program order: warp 0's prologue issues, then per tile
the wait (the mbarrier phase of the stage: the wait's parity must let it
pass only once the tile it names has landed, so the stage's issued fills
must be exactly that tile's), every warp's consume (each K / V vector read
for a position before `end` must be the arena's vector at (page of t, t %
page_size, kv head); rows past `end` are read for K but never for V), the
block barrier, then the issue of tile j + stages into the stage just
consumed (which every warp must be done with). Each copy is one run of
consecutive slots of one page (whole rows) or one token (a block with some
of the kv heads), its source bytes the arena's run. Counts: every (row,
query head, position) is consumed exactly once over a row's chunks. The
online softmax per slot (rescaled only on a new maximum) and the slots'
butterfly merge run in float64, then
the split partials merge as attend_merge.cuh does; every output must match
plain softmax(q k^T * scale) v to 1e-12. The grid is also cut to a few
blocks (a block takes many items: the ring's phases carry over items).
Shapes: the rows walk's decode and split test cases (groups 1 / 3 / 4 / 8 /
16 / 32, page sizes 4 / 5 / 8 / 16 / 32, head_dim 64 / 128 / 256) and the
bench's b1 / b256 shapes, at 1, 2, 7 and 64 splits, and with the rings
MSTAR_ATTN_ROWS_STAGES / _STAGE_KIB allow (2 x 16 KiB, 4 x 48 KiB, 3 x 32 KiB). Keep it in step with
the kernel.

  python3 bench/decode_attention_rows_trace.py      (needs numpy)
"""

import math

import numpy as np

STAGES = 2
STAGE_BUDGET = 48 * 1024
MAX_TILE = 64
MAX_WARPS = 8
MIN_CHUNK = 32
LOG2E = 1.4426950408889634


def ceil_div(a, b):
    return -(-a // b)


def heads_per_warp(group):
    return 1 if group == 1 else (2 if group == 2 else 4)


def shape_of(kv_heads, group, d, stages=STAGES, budget=STAGE_BUDGET):
    chunks = ceil_div(group, heads_per_warp(group))
    if chunks > MAX_WARPS or d not in (64, 128, 256):
        return None
    kv = min(kv_heads, MAX_WARPS // chunks)
    while kv_heads % kv:
        kv -= 1
    per_step = 32 // min(d // 8, 32)
    row_bytes = kv * d * 2
    tile = budget // (2 * row_bytes) // per_step * per_step
    tile = max(per_step, min(tile, MAX_TILE))
    return dict(kv=kv, warps=kv * chunks, tile=tile, chunks=chunks, stages=stages,
                smem=stages * 2 * tile * row_bytes, per_step=per_step,
                lanes=min(d // 8, 32))


def chunk_length(positions, splits, step):
    share = max(ceil_div(positions, splits), MIN_CHUNK)
    return ceil_div(share, step) * step


def used_chunks(positions, splits, step):
    return ceil_div(positions, chunk_length(positions, splits, step)) if positions > 0 else 0


class Case:
    def __init__(self, name, ps, hkv, hq, d, lengths, rng):
        self.name, self.ps, self.hkv, self.hq, self.d = name, ps, hkv, hq, d
        self.group = hq // hkv
        self.lengths = lengths
        self.layers, self.layer = 2, 1
        pages = [ceil_div(n, ps) for n in lengths]
        self.num_pages = sum(pages) + 5
        pool = rng.permutation(self.num_pages)
        self.indptr = np.concatenate([[0], np.cumsum(pages)]).astype(int)
        self.indices = pool[: self.indptr[-1]]
        self.last = [0 if n == 0 else (n % ps or ps) for n in lengths]
        # The arena as head vectors: [page][layer][K/V][slot][kv head] x D.
        self.arena = rng.standard_normal(
            (self.num_pages * self.layers * 2 * ps * hkv, d))
        self.q = rng.standard_normal((len(lengths), hq, d))
        # Head-vector units of the arena's geometry.
        self.token_units = hkv
        self.half_units = ps * hkv
        self.page_units = self.layers * 2 * self.half_units
        self.layer_units = self.layer * 2 * self.half_units

    def at(self, kv, page, slot, head):  # arena_args::at in head-vector units
        return (page * self.page_units + self.layer_units + kv * self.half_units
                + slot * self.token_units + head)

    def positions(self, r):
        pages = self.indptr[r + 1] - self.indptr[r]
        return 0 if pages == 0 else (pages - 1) * self.ps + self.last[r]

    def reference(self, r, h):
        n = self.positions(r)
        kvh = h // self.group
        idx = [self.at(0, self.indices[self.indptr[r] + t // self.ps], t % self.ps, kvh)
               for t in range(n)]
        k = self.arena[idx]
        v = self.arena[[i + self.half_units for i in idx]]
        s = k @ self.q[r, h] / math.sqrt(self.d)
        p = np.exp(s - s.max())
        return p @ v / p.sum()


def run(case, splits, grid_cap=None, ring=(STAGES, STAGE_BUDGET)):
    sh = shape_of(case.hkv, case.group, case.d, *ring)
    stages = sh["stages"]
    assert sh is not None, case.name
    kv_pb, tile, chunks = sh["kv"], sh["tile"], sh["chunks"]
    gc = heads_per_warp(case.group)
    lanes, per_step = sh["lanes"], sh["per_step"]
    head_bytes = case.d * 2
    row_bytes = kv_pb * head_bytes
    assert row_bytes % 16 == 0 and sh["smem"] <= 192 * 1024
    stage_units = 2 * tile * kv_pb
    whole = kv_pb == case.hkv
    kv_blocks = case.hkv // kv_pb
    rows = len(case.lengths)
    step = tile
    per_row = kv_blocks * splits
    total = per_row * rows
    grid = total if grid_cap is None else min(total, grid_cap)
    scale_log2 = LOG2E / math.sqrt(case.d)
    seen = np.zeros((rows, case.hq, max(case.lengths + [1])), dtype=int)
    part = {}  # (row, head, chunk) -> (m, l, acc)
    out = {}
    for b in range(grid):
        smem = np.full((stages * stage_units, case.d), np.nan)
        fills_issued = [0] * stages  # fills started on each stage's barrier
        fills_done = [0] * stages    # phases completed (copies land at issue here)
        busy = [None] * stages       # the global tile a stage holds, until consumed
        filled = 0
        for w in range(b, total, grid):
            chunk = w % splits
            kb = (w // splits) % kv_blocks
            r = w // per_row
            n_pos = case.positions(r)
            begin, end = 0, n_pos
            if splits > 1:
                length = chunk_length(n_pos, splits, step)
                begin = chunk * length
                end = min(begin + length, n_pos)
            if begin >= end:
                continue
            kv0 = kb * kv_pb
            tiles = ceil_div(end - begin, tile)
            first_page = case.indptr[r]

            def issue(j):
                t0 = begin + j * tile
                n = min(tile, end - t0)
                k = (filled + j) % stages
                assert busy[k] is None, "a stage refilled before every warp was done with it"
                busy[k] = filled + j
                assert (filled + j) // stages == fills_issued[k], "fills out of order"
                fills_issued[k] += 1
                expect = 2 * n * row_bytes
                assert expect < (1 << 20)
                got = 0
                for i in range(n):  # the lanes of warp 0 (i = lane, lane + 32)
                    t = t0 + i
                    slot = t % case.ps
                    if whole and i != 0 and slot != 0:
                        continue
                    run = min(n - i, case.ps - slot) if whole else 1
                    page = case.indices[first_page + t // case.ps]
                    assert case.indptr[r] <= first_page + t // case.ps < case.indptr[r + 1]
                    src = case.at(0, page, slot, kv0)
                    units = run * kv_pb
                    assert (run * row_bytes) % 16 == 0 and (src * head_bytes) % 16 == 0
                    dst = k * stage_units + i * kv_pb
                    assert (dst * head_bytes) % 16 == 0
                    # The run is contiguous in the arena: each position's
                    # kv heads kv0 .. kv0 + kv_pb - 1 lie where the copy reads.
                    for u in range(run):
                        for hk in range(kv_pb):
                            assert src + u * kv_pb + hk == case.at(0, page, slot + u, kv0 + hk)
                    smem[dst:dst + units] = case.arena[src:src + units]
                    vd = dst + tile * kv_pb
                    vs = src + case.half_units
                    smem[vd:vd + units] = case.arena[vs:vs + units]
                    got += 2 * run * row_bytes
                assert got == expect, "the armed bytes differ from the copies"
                fills_done[k] += 1  # the phase completes once they land

            for j in range(min(stages, tiles)):
                issue(j)
            # Every warp's state: [warp][slot][head] -> m, l, acc.
            nslots = 32 // lanes
            st_m = np.full((sh["warps"], nslots, gc), -np.inf)
            st_l = np.zeros((sh["warps"], nslots, gc))
            st_acc = np.zeros((sh["warps"], nslots, gc, case.d))
            for j in range(tiles):
                gt = filled + j
                k = gt % stages
                parity = (gt // stages) & 1
                # try_wait.parity P passes iff the completed phases' count has
                # the other parity; it must pass exactly when this fill landed.
                assert fills_issued[k] == gt // stages + 1, "waiting on a tile not issued"
                assert (fills_done[k] & 1) != parity
                assert busy[k] == gt
                t0 = begin + j * tile
                for warp in range(sh["warps"]):
                    hk, hc = warp // chunks, warp % chunks
                    kvh = kv0 + hk
                    h0 = kvh * case.group + hc * gc
                    valid = min(gc, case.group - hc * gc)
                    for s in range(nslots):
                        assert tile % per_step == 0
                        for rr in range(s, tile, per_step):
                            t = t0 + rr
                            kvec = smem[k * stage_units + rr * kv_pb + hk]
                            if t >= end:
                                continue
                            vvec = smem[k * stage_units + tile * kv_pb + rr * kv_pb + hk]
                            page = case.indices[first_page + t // case.ps]
                            want = case.at(0, page, t % case.ps, kvh)
                            assert np.array_equal(kvec, case.arena[want]), "K row mismatch"
                            assert np.array_equal(vvec, case.arena[want + case.half_units])
                            for h in range(gc):
                                qh = case.q[r, h0 + h] * scale_log2 if h < valid else 0 * kvec
                                sc = float(qh @ kvec)
                                m = st_m[warp, s, h]
                                if sc > m:  # rescaled only on a new maximum
                                    alpha = 2.0 ** (m - sc) if m != -np.inf else 0.0
                                    st_m[warp, s, h] = sc
                                    st_l[warp, s, h] *= alpha
                                    st_acc[warp, s, h] *= alpha
                                p = 2.0 ** (sc - st_m[warp, s, h])
                                st_l[warp, s, h] += p
                                st_acc[warp, s, h] += p * vvec
                                if h < valid:
                                    seen[r, h0 + h, t] += 1
                busy[k] = None  # the block barrier: every warp is done with it
                if j + stages < tiles:
                    issue(j + stages)
            filled += tiles
            # The slots' butterfly (xor offsets lanes .. 16): slot s and s ^ x.
            for warp in range(sh["warps"]):
                hk, hc = warp // chunks, warp % chunks
                h0 = (kv0 + hk) * case.group + hc * gc
                valid = min(gc, case.group - hc * gc)
                m, l, acc = st_m[warp].copy(), st_l[warp].copy(), st_acc[warp].copy()
                x = 1
                while x < nslots:
                    m2, l2, acc2 = m.copy(), l.copy(), acc.copy()
                    for s in range(nslots):
                        o = s ^ x
                        for h in range(gc):
                            top = max(m[s, h], m[o, h])
                            fa = 0.0 if m[s, h] == -np.inf else 2.0 ** (m[s, h] - top)
                            fb = 0.0 if m[o, h] == -np.inf else 2.0 ** (m[o, h] - top)
                            l2[s, h] = l[s, h] * fa + l[o, h] * fb
                            acc2[s, h] = acc[s, h] * fa + acc[o, h] * fb
                            m2[s, h] = top
                    m, l, acc = m2, l2, acc2
                    x *= 2
                for h in range(valid):
                    key = (r, h0 + h)
                    if splits > 1:
                        assert (r, h0 + h, chunk) not in part, "a partial written twice"
                        part[(r, h0 + h, chunk)] = (m[0, h], l[0, h], acc[0, h])
                    else:
                        assert key not in out, "an output written twice"
                        out[key] = acc[0, h] / l[0, h]
    for r in range(rows):
        n = case.positions(r)
        assert (seen[r, :, :n] == 1).all(), "a position not consumed exactly once"
        assert (seen[r, :, n:] == 0).all()
        for h in range(case.hq):
            if n == 0:
                continue
            if splits > 1:
                used = used_chunks(n, splits, step)
                ps_ = [part[(r, h, c)] for c in range(used)]  # KeyError: unwritten
                assert all((r, h, c) not in part for c in range(used, splits))
                top = max(p[0] for p in ps_)
                f = [2.0 ** (p[0] - top) if p[0] != -np.inf else 0.0 for p in ps_]
                o = sum(p[2] * fi for p, fi in zip(ps_, f)) / sum(p[1] * fi for p, fi in zip(ps_, f))
            else:
                o = out[(r, h)]
            ref = case.reference(r, h)
            err = np.abs(o - ref).max() / max(1e-30, np.abs(ref).max())
            assert err < 1e-12, (case.name, r, h, err)


def slot_sums_replay(lanes, gc, rng):
    """slot_sums (common.cuh's halving_sums, then the broadcasts) over a
    warp's 32 lanes: every lane must end with its slot's GC sums."""
    x = rng.standard_normal((32, gc))
    want = x.reshape(32 // lanes, lanes, gc).sum(axis=1)
    lane = np.arange(32)

    def shfl_xor(v, off):  # __shfl_xor_sync(.., off, width = lanes)
        return v[lane ^ off]

    if gc == 1:
        v = x[:, 0].copy()
        off = lanes // 2
        while off:
            v = v + shfl_xor(v, off)
            off //= 2
        got = v[:, None]
    else:
        x = x.copy()
        n = gc
        off = lanes // 2
        while off:
            if n > 1:
                upper = (lane & off) != 0
                new = x.copy()
                for i in range(gc // 2):
                    if i < n // 2:
                        keep = np.where(upper, x[:, i + n // 2], x[:, i])
                        send = np.where(upper, x[:, i], x[:, i + n // 2])
                        new[:, i] = keep + shfl_xor(send, off)
                x = new
                n //= 2
            else:
                x[:, 0] = x[:, 0] + shfl_xor(x[:, 0], off)
            off //= 2
        mine = x[:, 0]
        base = lane // lanes * lanes  # the width segment's first lane
        got = np.stack([mine[base + h * (lanes // gc)] for h in range(gc)], axis=1)
    assert np.allclose(got, want[lane // lanes], rtol=0, atol=1e-12), (lanes, gc)


def lengths(rng, count, max_len, ps):
    fixed = [1, ps - 1 + 1, 4 * ps - 1 + 1, ps + 1]
    return fixed + list(rng.integers(1, max_len + 1, count))


def main():
    rng = np.random.default_rng(7)
    for lanes in (8, 16, 32):
        for gc in (1, 2, 4):
            slot_sums_replay(lanes, gc, rng)
    print("slot_sums: every lane holds its slot's sums (8 / 16 / 32 lanes, 1 / 2 / 4 heads)")
    shapes = [  # name, page size, kv heads, q heads, head_dim, max length
        ("d128 group 4", 16, 8, 32, 128, 300),
        ("d128 group 8", 16, 4, 32, 128, 300),
        ("d64 group 3", 32, 2, 6, 64, 300),
        ("d128 page 4", 4, 2, 4, 128, 200),
        ("d64 page 8", 8, 2, 16, 64, 200),
        ("d256 group 1", 16, 2, 2, 256, 200),
        ("d256 group 1 3 kv", 8, 3, 3, 256, 300),
        ("d128 group 16", 16, 2, 32, 128, 200),
        ("d128 page 5", 5, 2, 8, 128, 300),
        ("d64 page 5", 5, 2, 8, 64, 300),
        ("d64 group 8 1 kv", 16, 1, 8, 64, 300),
        ("d128 group 32", 16, 2, 64, 128, 100),
        ("d128 12/4", 16, 4, 12, 128, 600),
    ]
    count = 0
    for name, ps, hkv, hq, d, max_len in shapes:
        case = Case(name, ps, hkv, hq, d, lengths(rng, 3, max_len, ps), rng)
        sh = shape_of(hkv, hq // hkv, d)
        for splits in (1, 2, 7, 64):
            run(case, splits)
            count += 1
        run(case, 7, grid_cap=3)
        # The environment's rings: 2 stages of 16 KiB, 4 of 48 KiB, 3 of 32 KiB.
        for ring in ((2, 16 * 1024), (4, 48 * 1024), (3, 32 * 1024)):
            run(case, 2, ring=ring)
            run(case, 5, grid_cap=2, ring=ring)
        count += 7
        print(f"{name}: kv/block {sh['kv']} warps {sh['warps']} tile {sh['tile']} "
              f"smem {sh['smem']} ok")
    # The bench's shapes (fewer positions: the indexing does not depend on them).
    for name, rows_, n in (("b1 bench shape", 1, 2048), ("b4 bench shape", 4, 333)):
        case = Case(name, 16, 8, 32, 128, [n] * rows_, rng)
        run(case, 64 if rows_ == 1 else 1)
        run(case, 8, grid_cap=2)
        count += 2
        print(f"{name} ok")
    print(f"{count} runs: every read, copy, phase and output checked")


if __name__ == "__main__":
    main()
