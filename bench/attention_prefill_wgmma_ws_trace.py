"""The warp-specialised wgmma prefill attention's protocol checked on the host:
attend_prefill_wgmma_ws (kernels/cuda/attention_prefill_wgmma_ws.cu)
transliterated for a persistent grid of `blocks` blocks dealt the items in
rounds (every other round reversed), each block's three warpgroups
(producer, consumers 0 and 1) as coroutines that a seeded random scheduler
interleaves at every point where the hardware could, over the shared memory
of attention_prefill_wgmma_trace.py (swizzled tiles, wgmma descriptors
decoded as the PTX ISA's layouts, the D / A fragments).

Barriers are modelled as the hardware keeps them: an mbarrier counts
arrivals down to its expected count, then completes its phase (phase number
+ 1, count reloaded); try_wait.parity P passes once the current phase's
parity differs from P, so a wait for a phase two ahead would pass wrongly,
as on the device. full[s] expects 128 arrivals (the producer threads),
empty[s] 8 (the consumer warps: a warpgroup is one coroutine arriving 4
times, its warps moving together through the .sync.aligned wgmmas).

Adversarial timing: a cp.async group's tile is NaN from its issue until the
producer's wait_group that covers it (its bytes may land at any moment in
between), real data after; a wgmma reads its shared operands both at its
issue and at the wait that completes it (it may read at any moment in
between) and the two reads must agree. So a stage refilled while a wgmma
may still read it, or read before its copy has landed, shows as a mismatch
or a NaN. Every wait is a scheduling point; a schedule where no coroutine
can move is a deadlock and fails. Checks as the other traces: outputs
written once, no NaN, float64 attention within 1e-2 normalised.

  python3 bench/attention_prefill_wgmma_ws_trace.py [name part]   (needs numpy)
"""

import random

import numpy as np

from attention_prefill_trace import bf16, case, expect_output, reference, tile_base, tile_item
from attention_prefill_trace import write_rows
from attention_prefill_wgmma_trace import BN, CASES, GROUP_M, TILE_M, deal, gather_a
from attention_prefill_wgmma_trace import qk_tile, read_mn_major, swizzled
from attention_prefill_wgmma_trace import warp_softmax, wgmma_desc

STAGES = 3
PRODUCER_THREADS = 128
CONSUMER_WARPS = 8


class mbarrier:
    def __init__(self, count):
        self.expected, self.pending, self.phase = count, count, 0

    def arrive(self, n=1):
        for _ in range(n):
            self.pending -= 1
            assert self.pending >= 0
            if self.pending == 0:
                self.phase += 1
                self.pending = self.expected

    def passed(self, parity):
        return (self.phase & 1) != parity


class named_barrier:
    """bar.sync / bar.arrive over `count` threads, whole warpgroups here:
    the generation ends when `count` threads have arrived, synced or not."""

    def __init__(self, count):
        self.count, self.arrived, self.generation = count, 0, 0

    def arrive(self, threads=128):
        self.arrived += threads
        assert self.arrived <= self.count
        if self.arrived == self.count:
            self.arrived, self.generation = 0, self.generation + 1


def run_block(c, block, blocks, out, writes, rng, ping_pong):
    d = c.d
    chunks = d // 8
    q_bytes, kv_bytes = TILE_M * d * 2, BN * d * 2
    smem = np.full((q_bytes + 2 * STAGES * kv_bytes) // 2, np.nan, np.float32)
    k0 = q_bytes
    v0 = k0 + STAGES * kv_bytes
    full = [mbarrier(PRODUCER_THREADS) for _ in range(STAGES)]
    empty = [mbarrier(CONSUMER_WARPS) for _ in range(STAGES)]
    turn = [named_barrier(256) for _ in range(2)]  # named barriers 3, 4
    tiles = tile_base(c, len(c.rows), TILE_M)
    total = tiles * c.kvh

    def put(addr, x):
        smem[addr // 2:addr // 2 + 8] = x

    def item_at(item):
        placed = tile_item(c, TILE_M, tiles, item)
        if placed is None:
            return None
        kvh, r, m_rows, f0, prefix = placed
        n_kt = (prefix + min(f0 + TILE_M - 1, m_rows - 1) // c.group) // BN + 1
        return dict(kvh=kvh, r=r, m_rows=m_rows, f0=f0, prefix=prefix, n_kt=n_kt)

    def items():
        """ws_nth_item: rounds of `blocks` items, every other one reversed."""
        n = 0
        while n * blocks < total:
            item = n * blocks + (block if n % 2 == 0 else blocks - 1 - block)
            n += 1
            w = item_at(item) if item < total else None
            if w is not None:
                yield w

    def kv_writes(w, t0, stage):
        """The producer's 128 threads' copies of one tile (load_kv_tile_ws):
        (address, 8 values)."""
        step = PRODUCER_THREADS // chunks
        dk, dv = k0 + stage * kv_bytes, v0 + stage * kv_bytes
        first, length = c.kv_indptr[w["r"]], c.length(w["r"])
        slot0 = t0 // c.ps
        shuffled = (t0 + BN - 1) // c.ps - slot0 < 32
        # lane j's page index: that of page slot slot0 + j, 0 past the row's
        lane_page = [int(c.kv_indices[first + slot0 + j]) if (slot0 + j) * c.ps < length else 0
                     for j in range(32)]
        res = []
        for tid in range(PRODUCER_THREADS):
            row0, chunk = tid // chunks, tid % chunks
            page_slot, in_page = (t0 + row0) // c.ps, (t0 + row0) % c.ps
            if shuffled:
                page_slot -= slot0  # relative, the shuffle's source lane
            for i in range(BN // step):
                row = row0 + i * step
                # every lane shuffles, in or past the row
                page = lane_page[page_slot & 31] if shuffled else None
                if t0 + row < length:
                    if not shuffled:
                        page = c.kv_indices[first + page_slot]
                    kx = c.arena[0, page, in_page, w["kvh"], chunk * 8:chunk * 8 + 8]
                    vx = c.arena[1, page, in_page, w["kvh"], chunk * 8:chunk * 8 + 8]
                else:
                    kx = vx = np.zeros(8, np.float32)
                res.append((dk + swizzled(BN, row, chunk), kx))
                res.append((dv + swizzled(BN, row, chunk), vx))
                in_page += step
                while in_page >= c.ps:
                    in_page -= c.ps
                    page_slot += 1
        return res

    def producer():
        groups = []  # committed cp.async groups not yet waited: (writes, stage)
        it, pending = 0, None
        for w in items():
            for kt in range(w["n_kt"]):
                stage, use = it % STAGES, it // STAGES
                if use > 0:
                    yield wait_phase(empty[stage], (use - 1) & 1)
                copies = kv_writes(w, kt * BN, stage)
                for addr, _ in copies:  # in flight: undefined until waited
                    put(addr, np.full(8, np.nan))
                groups.append(copies)
                yield None
                if pending is not None:
                    while len(groups) > 1:  # cp.async.wait_group 1
                        for addr, x in groups.pop(0):
                            put(addr, x)
                    yield None
                    full[pending].arrive(PRODUCER_THREADS)
                pending = stage
                it += 1
        if pending is not None:
            while groups:
                for addr, x in groups.pop(0):
                    put(addr, x)
            full[pending].arrive(PRODUCER_THREADS)

    def stage_q(w, wg):
        sign = np.float32(-1 if c.scale_log2 < 0 else 1)
        for tid in range(128):
            for i in range(GROUP_M * chunks // 128):
                cc = tid + i * 128
                row, chunk = wg * GROUP_M + cc // chunks, cc % chunks
                f = w["f0"] + row
                x = np.zeros(8, np.float32)
                if f < w["m_rows"]:
                    token = int(c.qo[w["r"]]) + f // c.group
                    head = w["kvh"] * c.group + f % c.group
                    x = bf16(sign * c.q[token, head, chunk * 8:chunk * 8 + 8])
                put(swizzled(TILE_M, row, chunk), x)

    def s_op(q_addr, k_addr):
        """S = Q K^T as the wgmmas read it now ([64][BN], float64)."""
        return qk_tile(smem, d, q_addr, k_addr)

    def pv_op(v_addr, pa):
        o = np.zeros((64, d))
        for kk in range(BN // 16):
            vd = wgmma_desc(v_addr + kk * 16 * 128, BN * 128, 1024)
            o += gather_a(pa[:, kk]) @ read_mn_major(smem, vd, d)
        return o

    def agree(at_issue, at_wait, what):
        assert not np.isnan(at_issue).any(), f"{what} read an operand before it landed"
        assert np.array_equal(at_issue, at_wait), f"{what}: its operand changed while in flight"

    def softmax(g, s, t0, masked, place, scale):
        """online_softmax per warp on the dealt S; returns (P dealt, alpha)."""
        alphas = np.empty((4, 2, 32), np.float32)
        for w in range(4):
            alphas[w] = warp_softmax(g, s, w, t0, masked, place, scale)
        return s, alphas

    def pack(s):
        pa = np.empty((4, BN // 16, 4, 32, 2), np.float32)
        for w in range(4):
            for kk in range(BN // 16):
                pa[w, kk, 0] = bf16(s[w, 2 * kk][:, 0:2])
                pa[w, kk, 1] = bf16(s[w, 2 * kk][:, 2:4])
                pa[w, kk, 2] = bf16(s[w, 2 * kk + 1][:, 0:2])
                pa[w, kk, 3] = bf16(s[w, 2 * kk + 1][:, 2:4])
        return pa

    def rescale(g, alphas):
        for w in range(4):
            if not np.all(alphas[w] == 1):
                g["o"][w, :, :, 0:2] *= alphas[w, 0][None, :, None]
                g["o"][w, :, :, 2:4] *= alphas[w, 1][None, :, None]

    def wait_phase(bar, parity):
        return lambda: bar.passed(parity)

    def my_turn(wg):
        """bar.sync 3 + wg, 256: arrive, then wait out the generation."""
        if ping_pong:
            bar = turn[wg]
            gen = bar.generation
            bar.arrive()
            yield lambda: bar.generation > gen

    def your_turn(wg):
        if ping_pong:
            turn[1 - wg].arrive()

    def release(stage):
        empty[stage].arrive(4)  # the warpgroup's 4 warps

    def consumer(wg):
        it = 0
        if wg == 1:
            your_turn(wg)  # warpgroup 0 goes first
        scale = abs(c.scale_log2)
        for w in items():
            fg = w["f0"] + wg * GROUP_M
            prefix, m_rows = w["prefix"], w["m_rows"]

            def pos_of(f):
                return prefix + min(f, m_rows - 1) // c.group

            gmin = pos_of(fg)
            gmax = pos_of(fg + GROUP_M - 1) if fg < m_rows else -1
            stage_q(w, wg)
            yield None
            g = dict(o=np.zeros((4, d // 8, 32, 4), np.float32),
                     m=np.full((4, 2, 32), -np.inf, np.float32), l=np.zeros((4, 2, 32), np.float32))
            last_kt = -1 if gmax < 0 else min(w["n_kt"] - 1, gmax // BN)
            q_addr = wg * GROUP_M * 128
            place = (prefix, m_rows, c.group, fg)

            def stage_of(kt):
                return (it + kt) % STAGES

            def wait_full(kt):
                return wait_phase(full[stage_of(kt)], ((it + kt) // STAGES) & 1)

            def k_at(kt):
                return k0 + stage_of(kt) * kv_bytes

            def v_at(kt):
                return v0 + stage_of(kt) * kv_bytes

            if last_kt >= 0:
                yield wait_full(0)  # tile 0: S alone
                yield from my_turn(wg)
                s_issue = s_op(q_addr, k_at(0))
                your_turn(wg)
                yield None
                agree(s_issue, s_op(q_addr, k_at(0)), "S of tile 0")  # wait<0>
                s, _ = softmax(g, deal(s_issue.astype(np.float32)), 0, BN - 1 > gmin, place, scale)
                pa = pack(s)
                for kt in range(1, last_kt + 1):
                    yield wait_full(kt)
                    yield from my_turn(wg)
                    s_issue = s_op(q_addr, k_at(kt))  # issue_s, then P V of kt - 1
                    pv_issue = pv_op(v_at(kt - 1), pa)
                    your_turn(wg)
                    yield None
                    agree(s_issue, s_op(q_addr, k_at(kt)), f"S of tile {kt}")  # wait<1>
                    t0 = kt * BN
                    s, alphas = softmax(g, deal(s_issue.astype(np.float32)), t0, t0 + BN - 1 > gmin,
                                        place, scale)
                    yield None
                    pv_wait = pv_op(v_at(kt - 1), pa)  # wait<0>
                    agree(pv_issue, pv_wait, f"P V of tile {kt - 1}")
                    g["o"] += deal(pv_wait)
                    release(stage_of(kt - 1))
                    rescale(g, alphas)
                    pa = pack(s)
                pv_issue = pv_op(v_at(last_kt), pa)  # the last tile's P V
                yield None
                pv_wait = pv_op(v_at(last_kt), pa)
                agree(pv_issue, pv_wait, f"P V of tile {last_kt}")
                g["o"] += deal(pv_wait)
                release(stage_of(last_kt))
            for kt in range(last_kt + 1, w["n_kt"]):  # after its rows: freed unread
                yield wait_full(kt)
                release(stage_of(kt))
                yield from my_turn(wg)
                your_turn(wg)
            it += w["n_kt"]
            for wp in range(4):
                fw = fg + 16 * wp
                if fw < m_rows:
                    write_rows(c, w["r"], w["kvh"], fw, g["o"][wp], g["l"][wp], m_rows, out, writes)
        if wg == 0:
            yield from my_turn(wg)  # warpgroup 1's last arrival

    # The scheduler: any coroutine that can move, picked at random.
    actors = {"producer": producer(), "wg0": consumer(0), "wg1": consumer(1)}
    blocked = {name: None for name in actors}  # a wait's condition, or None
    while actors:
        ready = [n for n in actors if blocked[n] is None or blocked[n]()]
        assert ready, f"deadlock, blocked: {sorted(actors)}"
        name = rng.choice(ready)
        try:
            blocked[name] = next(actors[name])
        except StopIteration:
            del actors[name]
    for s in range(STAGES):  # every phase completed: no arrival left over
        assert full[s].pending == full[s].expected and empty[s].pending == empty[s].expected
    assert all(b.arrived == 0 for b in turn), "a turn arrival left over"


def check(c, blocks, seed, ping_pong):
    out = np.full((int(c.qo[-1]), c.q_heads, c.d), np.nan)
    writes = np.zeros(out.shape[:2], int)
    rng = random.Random(seed)
    for b in range(blocks):
        run_block(c, b, blocks, out, writes, rng, ping_pong)
    ref = reference(c)
    kernel = "wgmma_ws_pp" if ping_pong else "wgmma_ws"
    name = f"{c.name} ({kernel}, {blocks} block{'s' if blocks > 1 else ''}, schedule {seed})"
    expect_output(name, out, writes, ref)


if __name__ == "__main__":
    import sys

    # An argument picks the cases whose name contains it.
    for seed, spec in enumerate(CASES, 1):
        if len(sys.argv) < 2 or sys.argv[1] in spec[0]:
            for blocks, schedule in ((1, seed), (3, 100 + seed)):
                for ping_pong in (False, True):
                    check(case(*spec[:6], seed, *spec[6:]), blocks, schedule, ping_pong)
