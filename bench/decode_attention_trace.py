"""The fast decode attention kernels' indexing checked on the host:
attend_fast (kernels/cuda/attention.cu), attend_split and both merges
(kernels/cuda/attention_split.cu, internal/attend_merge.cuh) with both K/V
walks transliterated, the 128 threads of a block as numpy arrays: the
register walk (internal/attend.cuh's walk, attention_walk::registers) and
the tile pipeline (internal/attend_tiles.cuh's tile_pages, tile_issue,
walk_tiles) at 4 and 2 stages (pipeline4, pipeline2), then consume and
merge_slots.

The register walk reads each slot's positions a step ahead by page id. The
tiled walk replays the pipeline in program order: the prologue's S - 1
tiles, then per tile the wait (the tile's commit group must be among those
cp.async.wait_group S - 2 has completed), the barrier, the issue of tile n +
S - 1 into its stage (which must hold a tile already consumed) and the
consume of tile n from stage n % S (which must hold tile n). The stages are
NaN-filled at the start and copies past the range's end zero-fill, so a read
of a slot nobody copied turns the output NaN. Every copy reads the page id
the thread read a tile earlier, which must be the row's own page (the
page-table read inside the row's kv_indptr range), and every K / V vector a
slot consumes must equal the arena's vector at (page of t, t % page_size, kv
head), the thread's pieces covering each tile half exactly once. Counts:
each (row, query head, position) is consumed exactly once by the one-pass
kernel and exactly once over a split row's chunks, by every walk; each used
partial is written exactly once and both merges (merge_splits_warp: partials
in order; merge_splits_block: warp w adds partials w, w + 4, ..., the warps
added in order) read only written partials. In float64 every output must
match plain softmax(q k^T * scale) v to 1e-12. Shapes: the decode and split
cases of tests/gpu/gpu_attention_test.cpp (bf16 and f32 element sizes,
head_dim 64 / 128 / 256, groups 1-8, page sizes 4 / 8 / 16 / 32, rows of 1
token, page boundaries and random lengths) and the bench's b1 shape (2048
positions, 8 / 32 heads, 64 chunks). Keep it in step with the kernels.

  python3 bench/decode_attention_trace.py      (needs numpy; a few minutes)
"""

import math

import numpy as np

THREADS = 128
WALKS = {"regs": 0, "cp4": 4, "cp2": 2}  # attention_walk: stages (0: registers)
MAX_SPLITS = 128
MIN_CHUNK = 32
SPLIT_WAVES = 2
LOG2E = 1.4426950408889634
TID = np.arange(THREADS)


def layout(sz, d):
    lanes = min(d * sz // 16, 32)
    elems = d // lanes
    vecs = elems * sz // 16
    slots = THREADS // lanes
    unroll = 2 if vecs == 1 else 1
    return dict(lanes=lanes, elems=elems, vecs=vecs, slots=slots, unroll=unroll,
                step=slots * unroll)


def tile(sz, d):
    L = layout(sz, d)
    head_bytes = d * sz
    pieces = head_bytes // 16
    half = L["step"] * pieces
    assert L["step"] * head_bytes == 4096
    assert half % THREADS == 0
    return dict(positions=L["step"], pieces=pieces, half=half, per_thread=half // THREADS,
                epp=16 // sz)


class Step:
    """One decode step: rows of `lengths` positions over shuffled pages."""

    def __init__(self, rng, sz, d, ps, kv_heads, q_heads, lengths):
        self.sz, self.d, self.ps = sz, d, ps
        self.kv_heads, self.q_heads = kv_heads, q_heads
        self.group = q_heads // kv_heads
        self.lengths = lengths
        pages = [math.ceil(n / ps) for n in lengths]
        num_pages = sum(pages) + 5
        ids = rng.permutation(num_pages).astype(np.int64)
        self.kv_indptr = np.concatenate([[0], np.cumsum(pages)]).astype(np.int64)
        self.kv_indices = ids[: sum(pages)]
        self.arena = rng.standard_normal((num_pages, 2, ps, kv_heads, d))
        self.q = rng.standard_normal((len(lengths), q_heads, d))
        self.scale_log2 = LOG2E / math.sqrt(d)

    def vector(self, r, kv, kvh, t):
        page = self.kv_indices[self.kv_indptr[r] + t // self.ps]
        return self.arena[page, kv, t % self.ps, kvh]

    def reference(self):
        out = np.zeros_like(self.q)
        for r, n in enumerate(self.lengths):
            for h in range(self.q_heads):
                kvh = h // self.group
                k = np.stack([self.vector(r, 0, kvh, t) for t in range(n)])
                v = np.stack([self.vector(r, 1, kvh, t) for t in range(n)])
                s = k @ self.q[r, h] / math.sqrt(self.d)
                p = np.exp(s - s.max())
                out[r, h] = p @ v / p.sum()
        return out


def consume(st, r, kvh, q, ts, kvecs, vvecs, end, seen, acc, m, l, sl):
    """attend.cuh's consume for slot `sl` at positions `ts` (vectors as the
    walk brought them in)."""
    gc = q.shape[0]
    for u, t in enumerate(ts):
        if t < end:
            assert np.array_equal(kvecs[u], st.vector(r, 0, kvh, t))
            assert np.array_equal(vvecs[u], st.vector(r, 1, kvh, t))
            seen[t] += 1
    sc = np.array([[q[g] @ kvecs[u] if ts[u] < end else -np.inf for g in range(gc)]
                   for u in range(len(ts))])
    for g in range(gc):
        top = max(m[sl, g], sc[:, g].max())
        ref = 0.0 if top == -np.inf else top
        alpha = 2.0 ** (m[sl, g] - ref)
        m[sl, g] = top
        l[sl, g] *= alpha
        acc[sl, g] *= alpha
        for u in range(len(ts)):
            pw = 2.0 ** (sc[u, g] - ref)
            l[sl, g] += pw
            if ts[u] < end:
                acc[sl, g] += pw * vvecs[u]


def walk_registers(st, r, kvh, q, begin, end, seen):
    """attend.cuh's walk: slot s takes positions base + s * unroll .. + unroll
    - 1 of every block step, each read by its page id (the next step's loads
    in flight while this one's are consumed: the same reads, a step
    earlier). The loop bound is the block's."""
    L = layout(st.sz, st.d)
    U = L["unroll"]
    first_page, row_end = st.kv_indptr[r], st.kv_indptr[r + 1]
    gc = q.shape[0]
    acc = np.zeros((L["slots"], gc, st.d))
    m = np.full((L["slots"], gc), -np.inf)
    l = np.zeros((L["slots"], gc))
    zero = np.zeros(st.d)
    for base in range(begin, end, L["step"]):
        for sl in range(L["slots"]):
            ts = [base + sl * U + u for u in range(U)]
            kvecs, vvecs = [], []
            for t in ts:
                if t < end:  # load_kv reads only positions below end
                    at = first_page + t // st.ps
                    assert at < row_end, "page id read past the row's pages"
                    kvecs.append(st.vector(r, 0, kvh, t))
                    vvecs.append(st.vector(r, 1, kvh, t))
                else:
                    kvecs.append(zero)
                    vvecs.append(zero)
            consume(st, r, kvh, q, ts, kvecs, vvecs, end, seen, acc, m, l, sl)
    return acc, m, l


def walk(st, r, kvh, q, begin, end, seen, stages):
    """The block's walk (walk_block): registers (stages 0) or walk_tiles with
    `stages` stages. Per-slot (acc, m, l); `seen[t]` counts the positions
    consumed. q: [GC][D], scaled."""
    if stages == 0:
        return walk_registers(st, r, kvh, q, begin, end, seen)
    sz, d, ps = st.sz, st.d, st.ps
    L, T = layout(sz, d), tile(sz, d)
    gc = q.shape[0]
    U, P, S = L["unroll"], T["positions"], stages
    assert begin % P == 0, "the tiled walk starts on a tile"
    first_page, row_end = st.kv_indptr[r], st.kv_indptr[r + 1]
    # Each tile half's pieces: every (thread, j) once.
    idx_all = np.concatenate([TID + j * THREADS for j in range(T["per_thread"])])
    assert np.array_equal(np.sort(idx_all), np.arange(T["half"]))

    def tile_pages(t0):
        out = [t0]
        for j in range(T["per_thread"]):
            t = t0 + (TID + j * THREADS) // T["pieces"]
            at = first_page + t // ps
            assert np.all(at[t < end] < row_end), "page id read past the row's pages"
            out.append(np.where(t < end, st.kv_indices[np.minimum(at, len(st.kv_indices) - 1)], 0))
        return out

    stage = np.full((S, 2, T["half"], T["epp"]), np.nan)
    holds = [None] * S  # which tile a stage holds
    consumed = set()
    groups = []  # commit groups: tiles per group

    def issue(n, page):
        t0 = begin + n * P
        assert page[0] == t0, "page ids prefetched for another tile"
        page = page[1:]
        s = n % S
        assert holds[s] is None or holds[s] in consumed, "stage overwritten before use"
        for j in range(T["per_thread"]):
            idx = TID + j * THREADS
            t = t0 + idx // T["pieces"]
            ok = t < end
            slot = np.where(ok, t % ps, 0)
            piece = idx % T["pieces"]
            for kv in range(2):
                src = st.arena[page[j], kv, slot, kvh]  # [THREADS, D]
                cols = piece[:, None] * T["epp"] + np.arange(T["epp"])[None, :]
                data = np.take_along_axis(src, cols, 1)
                stage[s, kv, idx] = np.where(ok[:, None], data, 0.0)
        holds[s] = n
        groups[-1].append(n)

    tiles = -(-(end - begin) // P)
    first = [tile_pages(begin + k * P) for k in range(S - 1)]
    for k in range(S - 1):
        groups.append([])
        if k < tiles:
            issue(k, first[k])
    nxt = S - 1
    page = tile_pages(begin + nxt * P)
    acc = np.zeros((L["slots"], gc, d))
    m = np.full((L["slots"], gc), -np.inf)
    l = np.zeros((L["slots"], gc))
    for n in range(tiles):
        done = len(groups) - (S - 2)  # wait_group S - 2
        assert any(n in g for g in groups[:done]), "tile consumed before its copies landed"
        groups.append([])
        if nxt < tiles:
            issue(nxt, page)
            nxt += 1
            page = tile_pages(begin + nxt * P)
        s = n % S
        assert holds[s] == n, "stage holds another tile"
        t0 = begin + n * P
        # consume: slot's positions slot * U + u, lane's pieces lane * vecs + j.
        for sl in range(L["slots"]):
            ts = [t0 + sl * U + u for u in range(U)]
            kvecs, vvecs = [], []
            for u in range(U):
                p = sl * U + u
                at = [p * T["pieces"] + ln * L["vecs"] + j
                      for ln in range(L["lanes"]) for j in range(L["vecs"])]
                kvecs.append(stage[s, 0, at].reshape(-1))
                vvecs.append(stage[s, 1, at].reshape(-1))
            consume(st, r, kvh, q, ts, kvecs, vvecs, end, seen, acc, m, l, sl)
        consumed.add(n)
    return acc, m, l


def merge_slots(acc, m, l):
    top = m.max(0)
    o = np.zeros(acc.shape[1:])
    tl = np.zeros(top.shape)
    for sl in range(m.shape[0]):
        for g in range(m.shape[1]):
            if m[sl, g] == -np.inf:
                continue
            f = 2.0 ** (m[sl, g] - top[g])
            tl[g] += l[sl, g] * f
            o[g] += acc[sl, g] * f
    return o, tl, top


def head_chunks(st):
    gc = 1 if st.group == 1 else (2 if st.group == 2 else 4)
    return gc, -(-st.group // gc)


def q_block(st, r, h0, valid, gc):
    q = np.zeros((gc, st.d))  # load_q: heads g < valid (valid may pass gc)
    n = min(valid, gc)
    q[:n] = st.q[r, h0:h0 + n] * st.scale_log2
    return q


def one_pass(st, stages):
    gc, chunks = head_chunks(st)
    out = np.full(st.q.shape, np.nan)
    for r, n in enumerate(st.lengths):
        for kvh in range(st.kv_heads):
            for c in range(chunks):
                h0, valid = kvh * st.group + c * gc, st.group - c * gc
                seen = np.zeros(n, int)
                acc, m, l = walk(st, r, kvh, q_block(st, r, h0, valid, gc), 0, n, seen, stages)
                assert np.all(seen == 1), "one pass: a position not consumed exactly once"
                o, tl, _ = merge_slots(acc, m, l)
                for g in range(min(valid, gc)):
                    out[r, h0 + g] = o[g] / tl[g]
    return out


def chunk_length(n, splits, step):
    share = max(-(-n // splits), MIN_CHUNK)
    return -(-share // step) * step


def used_chunks(n, splits, step):
    return -(-n // chunk_length(n, splits, step)) if n > 0 else 0


def plan_splits(st, num_sms, resident):
    """attention_split.cu's plan_splits (host sizes only)."""
    gc, chunks = head_chunks(st)
    rows = len(st.lengths)
    blocks = rows * st.kv_heads * chunks
    wave = resident * num_sms
    if 2 * blocks > wave:
        return 1
    by_grid = SPLIT_WAVES * wave // blocks
    by_length = len(st.kv_indices) * st.ps // (rows * MIN_CHUNK)
    splits = min(by_grid, by_length, MAX_SPLITS)
    return splits if splits >= 2 else 1


def merge_warp(f, l, acc, used):
    """merge_splits_warp for one (row, q head): lanes weigh partials i, i +
    32, ...; each output element adds the partials in order."""
    total = sum(l[i] * f[i] for i in range(used))
    o = np.zeros(acc.shape[1])
    for i in range(used):
        o += f[i] * acc[i]
    return o / total


def merge_block(f, l, acc, used, warps=4):
    """merge_splits_block for one (row, q head): thread i weighs partial i;
    warp w adds partials w, w + warps, ...; the warps' sums added in warp
    order."""
    assert used <= MAX_SPLITS, "one thread weighs one partial"
    total = (l[:used] * f[:used]).sum()
    red = np.zeros((warps, acc.shape[1]))
    for w in range(warps):
        for k in range(w, used, warps):
            red[w] += f[k] * acc[k]
    return red.sum(0) / total


def split(st, splits, stages):
    """attend_split over every chunk with the walk of `stages`, then both
    merges on its partials: {"mwarp": out, "mblock": out}."""
    gc, chunks = head_chunks(st)
    step = layout(st.sz, st.d)["step"]
    rows = len(st.lengths)
    ws_acc = np.full((rows, st.q_heads, splits, st.d), np.nan)
    ws_m = np.full((rows, st.q_heads, splits), np.nan)
    ws_l = np.full((rows, st.q_heads, splits), np.nan)
    writes = np.zeros((rows, st.q_heads, splits), int)
    for r, n in enumerate(st.lengths):
        length = chunk_length(n, splits, step)
        assert length % step == 0
        for kvh in range(st.kv_heads):
            for c in range(chunks):
                h0, valid = kvh * st.group + c * gc, st.group - c * gc
                seen = np.zeros(n, int)
                for sp in range(splits):
                    begin = sp * length
                    if begin >= n:
                        continue
                    end = min(begin + length, n)
                    acc, m, l = walk(st, r, kvh, q_block(st, r, h0, valid, gc), begin, end, seen,
                                     stages)
                    o, tl, top = merge_slots(acc, m, l)
                    for g in range(min(valid, gc)):
                        ws_acc[r, h0 + g, sp] = o[g]
                        ws_m[r, h0 + g, sp] = top[g]
                        ws_l[r, h0 + g, sp] = tl[g]
                        writes[r, h0 + g, sp] += 1
                assert np.all(seen == 1), "split: a position not consumed exactly once"
    outs = {name: np.full(st.q.shape, np.nan) for name in ("mwarp", "mblock")}
    for r, n in enumerate(st.lengths):
        used = used_chunks(n, splits, step)
        assert used <= splits
        for h in range(st.q_heads):
            assert np.all(writes[r, h, :used] == 1), "a used partial not written exactly once"
            mi = ws_m[r, h, :used]  # only written partials are read (NaN otherwise)
            top = mi.max()
            f = np.where(mi == -np.inf, 0.0, 2.0 ** (mi - top))
            outs["mwarp"][r, h] = merge_warp(f, ws_l[r, h], ws_acc[r, h], used)
            outs["mblock"][r, h] = merge_block(f, ws_l[r, h], ws_acc[r, h], used)
    return outs


def check(name, st, num_sms=132, resident=4):
    ref = st.reference()
    splits = plan_splits(st, num_sms, resident)
    line = f"{name}:"
    for walk_name, stages in WALKS.items():
        err = np.abs(one_pass(st, stages) - ref).max()
        assert err < 1e-12, (name, walk_name, "one pass", err)
        worst = err
        # The planned split and forced ones (as the workspace divisor tests).
        for s in sorted({splits, 3, 64}):
            if s < 2:
                continue
            for merge_name, got in split(st, s, stages).items():
                e = np.abs(got - ref).max()
                assert e < 1e-12, (name, walk_name, merge_name, "split", s, e)
                worst = max(worst, e)
        line += f" {walk_name} {worst:.1e}"
    print(line + f" (max err over one pass and splits {sorted({splits, 3, 64} - {1})}, "
          f"planned {splits})")


def split_rows(rng, ps, count, max_len):
    return [1, ps, 4 * ps, ps + 1] + list(rng.integers(1, max_len + 1, count))


def main():
    rng = np.random.default_rng(17)
    BF16, F32 = 2, 4
    cases = [
        # tests/gpu/gpu_attention_test.cpp's decode fast path (lengths trimmed).
        ("d128 bf16 group 4", BF16, 128, 16, 8, 32, list(rng.integers(1, 300, 5))),
        ("d128 bf16 group 8", BF16, 128, 16, 4, 32, list(rng.integers(1, 300, 3))),
        ("d128 f32 group 1", F32, 128, 16, 4, 4, list(rng.integers(1, 300, 4))),
        ("d64 bf16 group 3", BF16, 64, 32, 2, 6, list(rng.integers(1, 300, 4))),
        ("d256 f32 group 2", F32, 256, 16, 2, 4, list(rng.integers(1, 300, 4))),
        ("d128 bf16 page 4", BF16, 128, 4, 2, 4, list(rng.integers(1, 300, 4))),
        ("d64 bf16 page 8", BF16, 64, 8, 2, 16, list(rng.integers(1, 300, 3))),
        # the split cases
        ("d128 bf16 12/4", BF16, 128, 16, 4, 12, split_rows(rng, 16, 3, 700)),
        ("d64 f32 12/4", F32, 64, 32, 4, 12, split_rows(rng, 32, 3, 700)),
        ("d256 bf16 group 1", BF16, 256, 8, 3, 3, split_rows(rng, 8, 2, 500)),
        ("d64 bf16 group 8", BF16, 64, 16, 1, 8, split_rows(rng, 16, 2, 500)),
        ("d256 f32 group 2 split", F32, 256, 16, 2, 4, split_rows(rng, 16, 2, 500)),
        ("d128 f32 page 8", F32, 128, 8, 2, 4, split_rows(rng, 8, 2, 300)),
        ("one long row d128 bf16", BF16, 128, 16, 2, 8, [1999]),
    ]
    for name, sz, d, ps, hkv, hq, lengths in cases:
        check(name, Step(rng, sz, d, ps, hkv, hq, [int(n) for n in lengths]))
    # The bench's b1 shape: 64 chunks of 32 positions (two tiles a block).
    st = Step(rng, BF16, 128, 16, 8, 32, [2048])
    assert plan_splits(st, 132, 4) == 64
    ref = st.reference()
    for walk_name, stages in WALKS.items():
        for merge_name, got in split(st, 64, stages).items():
            e = np.abs(got - ref).max()
            assert e < 1e-12, (walk_name, merge_name, e)
            print(f"bench b1 (1 x 2048, 8/32 heads, d128 bf16): 64 splits {walk_name} "
                  f"{merge_name} max err {e:.1e}")
    print("all checks passed")


if __name__ == "__main__":
    main()
