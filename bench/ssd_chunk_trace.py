"""The chunked SSD kernels' indexing checked on the host: chunk_cb,
chunk_state, state_pass and chunk_output (kernels/cuda/ssd_chunk_output.cu,
ssd_chunk_recurrence.cu) transliterated loop for loop, with their shared
memory and workspace as flat NaN-filled float64 arrays at the kernels'
offsets and leading dimensions, each wmma load / store a strided read /
write of one 16x8 / 8x16 / 16x16 tile. A read of memory no step wrote turns
an output NaN; in float64 the outputs and final states must match the
sequential scan to 1e-9 (no TF32 here: bench/ssd_chunk_emulation.py has the
rounding). Shapes: several rows with partial last chunks, N 64 / 128, P 32
/ 64 / 128 (one or two column passes), 1-2 groups. Keep it in step with the
kernels when their tiles or layouts change.

  python3 bench/ssd_chunk_trace.py      (needs numpy; about 20 s)
"""

import numpy as np

CHUNK, WARPS = 128, 8
TILES = CHUNK // 16
PAIRS = TILES // 2
LD_L = CHUNK + 4


def load(mem, off, ld, rows, cols, layout):
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    return mem[off + (r * ld + c if layout == "row" else r + c * ld)]


def store(mem, off, ld, m):
    r = np.arange(m.shape[0])[:, None]
    c = np.arange(m.shape[1])[None, :]
    mem[off + r * ld + c] = m


class Batch:
    """Inputs as tests/gpu/gpu_recurrent_test.cpp packs them: rows of
    [x | B | C | dt | 3 spare]."""

    def __init__(self, lens, H, P, N, G, seed):
        rng = np.random.default_rng(seed)
        self.lens, self.H, self.P, self.N, self.G = lens, H, P, N, G
        self.cols = 64 if P % 64 == 0 else 32
        self.xw, bcw = H * P, G * N
        self.row = self.xw + 2 * bcw + H + 3
        self.cu = np.concatenate([[0], np.cumsum(lens)])
        self.T = self.cu[-1]
        self.packed = rng.uniform(-2, 2, self.T * self.row)
        self.xo, self.bo, self.co, self.dto = 0, self.xw, self.xw + bcw, self.xw + 2 * bcw
        self.dt_bias = rng.uniform(-1, 1, H)
        self.A_log = rng.uniform(-1, 1.5, H)
        self.D = rng.uniform(-1, 1, H)
        self.state = rng.uniform(-0.5, 0.5, (len(lens), H, P, N))

    def at(self, t, off, n):
        return self.packed[t * self.row + off:t * self.row + off + n]

    def dt_of(self, t, h):
        v = self.packed[t * self.row + self.dto + h] + self.dt_bias[h]
        sp = v if v > 20 else np.log1p(np.exp(v))
        return min(max(sp, 1e-3), 10.0)

    def decays(self, t0, n, h):
        dts = np.array([self.dt_of(t0 + t, h) if t < n else 0.0 for t in range(CHUNK)])
        return np.cumsum(dts * -np.exp(self.A_log[h])), dts


def sequential(b):
    y = np.zeros((b.T, b.xw))
    state = b.state.copy()
    for r in range(len(b.lens)):
        for h in range(b.H):
            s, a, g = state[r, h], -np.exp(b.A_log[h]), h // (b.H // b.G)
            for t in range(b.cu[r], b.cu[r + 1]):
                d = b.dt_of(t, h)
                x = b.at(t, b.xo + h * b.P, b.P)
                s = np.exp(d * a) * s + d * np.outer(x, b.at(t, b.bo + g * b.N, b.N))
                y[t, h * b.P:(h + 1) * b.P] = s @ b.at(t, b.co + g * b.N, b.N) + b.D[h] * x
            state[r, h] = s
    return y, state


def chunk_cb(b, table, span, cb):
    N, ld_n = b.N, b.N + 4
    for c in range(len(table)):
        for g in range(b.G):
            t0, n = span(c)
            sm = np.full(2 * CHUNK * ld_n, np.nan)
            cs, bs = 0, CHUNK * ld_n
            for i in range(CHUNK * N):
                t, col = i // N, i % N
                at = (t0 + t) * b.row + g * N + col
                sm[cs + t * ld_n + col] = b.packed[b.co + at] if t < n else 0.0
                sm[bs + t * ld_n + col] = b.packed[b.bo + at] if t < n else 0.0
            out = (c * b.G + g) * CHUNK * CHUNK
            for job in range(TILES * (TILES + 1) // 2):
                ti = 0
                while (ti + 1) * (ti + 2) // 2 <= job:
                    ti += 1
                tj = job - ti * (ti + 1) // 2
                acc = np.zeros((16, 16))
                for k0 in range(0, N, 8):
                    acc += (load(sm, cs + ti * 16 * ld_n + k0, ld_n, 16, 8, "row")
                            @ load(sm, bs + tj * 16 * ld_n + k0, ld_n, 8, 16, "col"))
                store(cb, out + ti * 16 * CHUNK + tj * 16, CHUNK, acc)


def chunk_state(b, table, span, states, gammas):
    H, P, N, cols = b.H, b.P, b.N, b.cols
    ld_n, ld_x = N + 4, cols + 4
    rt_n = cols // 16
    ct = (N // 16) * rt_n // WARPS
    for c in range(len(table)):
        for h in range(H):
            t0, n = span(c)
            g = h // (H // b.G)
            cum, wts = b.decays(t0, n, h)
            wts = wts * np.exp(cum[-1] - cum)
            gammas[c * H + h] = np.exp(cum[-1])
            sm = np.full(CHUNK * ld_n + CHUNK * ld_x, np.nan)
            bs, xw = 0, CHUNK * ld_n
            for i in range(CHUNK * N):
                t, col = i // N, i % N
                sm[bs + t * ld_n + col] = b.packed[(t0 + t) * b.row + b.bo + g * N + col] if t < n else 0.0
            out = (c * H + h) * P * N
            k_end = (n + 7) // 8 * 8
            for p0 in range(0, P, cols):
                for i in range(CHUNK * cols):
                    t, col = i // cols, i % cols
                    x = b.packed[(t0 + t) * b.row + b.xo + h * P + p0 + col] if t < n else 0.0
                    sm[xw + t * ld_x + col] = x * wts[t] if t < n else 0.0
                for w in range(WARPS):
                    rt, c0 = w % rt_n, (w // rt_n) * ct
                    for j in range(ct):
                        acc = np.zeros((16, 16))
                        for k0 in range(0, k_end, 8):
                            acc += (load(sm, xw + k0 * ld_x + rt * 16, ld_x, 16, 8, "col")
                                    @ load(sm, bs + k0 * ld_n + (c0 + j) * 16, ld_n, 8, 16, "row"))
                        store(states, out + (p0 + rt * 16) * N + (c0 + j) * 16, N, acc)


def state_pass(b, row_first, states, gammas, state):
    PN = b.P * b.N
    for r, length in enumerate(b.lens):
        for h in range(b.H):
            hv = state[r, h].reshape(-1).copy()
            for cc in range((length + CHUNK - 1) // CHUNK):
                e = row_first[r] + cc
                o = (e * b.H + h) * PN
                local = states[o:o + PN].copy()
                states[o:o + PN] = hv
                hv = gammas[e * b.H + h] * hv + local
            state[r, h] = hv.reshape(b.P, b.N)


def chunk_output(b, table, span, cb, states, y):
    H, P, N, cols = b.H, b.P, b.N, b.cols
    ld_n, ld_x = N + 4, cols + 4
    a0 = 3 * CHUNK
    hs = a0 + CHUNK * ld_n
    xs = a0 + CHUNK * max(ld_n, LD_L)
    floats = max(hs + cols * ld_n, xs + CHUNK * ld_x)
    ct = cols // 16 // (WARPS // PAIRS)

    def tiles_of(w):
        return (w % PAIRS, TILES - 1 - w % PAIRS), (w // PAIRS) * ct

    for c in range(len(table)):
        for h in range(H):
            t0, n = span(c)
            g = h // (H // b.G)
            sm = np.full(floats, np.nan)
            cum, dts = b.decays(t0, n, h)
            eg = np.exp(cum)
            cbo, start = (c * b.G + g) * CHUNK * CHUNK, (c * H + h) * P * N
            for p0 in range(0, P, cols):
                acc = {}
                for i in range(CHUNK * N):  # phase 1
                    t, col = i // N, i % N
                    v = b.packed[(t0 + t) * b.row + b.co + g * N + col] if t < n else 0.0
                    sm[a0 + t * ld_n + col] = eg[t] * v if t < n else 0.0
                for i in range(cols * N // 4):
                    p, col = i // (N // 4), 4 * (i % (N // 4))
                    src = start + (p0 + p) * N + col
                    sm[hs + p * ld_n + col:hs + p * ld_n + col + 4] = states[src:src + 4]
                for w in range(WARPS):
                    rows, c0 = tiles_of(w)
                    for q in range(2):
                        for j in range(ct):
                            acc[w, q, j] = sum(
                                load(sm, a0 + rows[q] * 16 * ld_n + k0, ld_n, 16, 8, "row")
                                @ load(sm, hs + (c0 + j) * 16 * ld_n + k0, ld_n, 8, 16, "col")
                                for k0 in range(0, N, 8))
                for i in range(CHUNK * CHUNK // 4):  # phase 2
                    t, s = i // (CHUNK // 4), 4 * (i % (CHUNK // 4))
                    m = np.zeros(4)
                    if s <= t:
                        v = cb[cbo + t * CHUNK + s:cbo + t * CHUNK + s + 4]
                        for k in range(4):
                            if s + k <= t:
                                m[k] = v[k] * np.exp(cum[t] - cum[s + k]) * dts[s + k]
                    sm[a0 + t * LD_L + s:a0 + t * LD_L + s + 4] = m
                for i in range(CHUNK * cols):
                    t, col = i // cols, i % cols
                    x = b.packed[(t0 + t) * b.row + b.xo + h * P + p0 + col] if t < n else 0.0
                    sm[xs + t * ld_x + col] = x
                for w in range(WARPS):
                    rows, c0 = tiles_of(w)
                    k_lo = min(16 * (rows[0] + 1), (n + 7) // 8 * 8)
                    k_hi = min(16 * (rows[1] + 1), (n + 7) // 8 * 8)
                    for k0 in range(0, k_hi, 8):
                        for q in range(2):
                            if q == 1 or k0 < k_lo:
                                for j in range(ct):
                                    acc[w, q, j] += (
                                        load(sm, a0 + rows[q] * 16 * LD_L + k0, LD_L, 16, 8, "row")
                                        @ load(sm, xs + k0 * ld_x + (c0 + j) * 16, ld_x, 8, 16, "row"))
                for w in range(WARPS):
                    rows, c0 = tiles_of(w)
                    for q in range(2):
                        for j in range(ct):
                            store(sm, a0 + rows[q] * 16 * ld_x + (c0 + j) * 16, ld_x, acc[w, q, j])
                for i in range(n * cols):
                    t, col = i // cols, i % cols
                    y[(t0 + t) * b.xw + h * P + p0 + col] = (
                        sm[a0 + t * ld_x + col] + b.D[h] * sm[xs + t * ld_x + col])


def run(lens, H, P, N, G, seed):
    b = Batch(lens, H, P, N, G, seed)
    table, row_first = [], []
    for r, length in enumerate(lens):
        row_first.append(len(table))
        table += [(r, j) for j in range((length + CHUNK - 1) // CHUNK)]

    def span(c):
        r, j = table[c]
        t0 = b.cu[r] + j * CHUNK
        return t0, min(CHUNK, b.cu[r + 1] - t0)

    nc = len(table)
    cb = np.full(nc * G * CHUNK * CHUNK, np.nan)
    states = np.full(nc * H * P * N, np.nan)
    gammas = np.full(nc * H, np.nan)
    y = np.full(b.T * b.xw, np.nan)
    state = b.state.copy()
    chunk_cb(b, table, span, cb)
    chunk_state(b, table, span, states, gammas)
    state_pass(b, row_first, states, gammas, state)
    chunk_output(b, table, span, cb, states, y)
    y = y.reshape(b.T, b.xw)
    ref_y, ref_s = sequential(b)
    ey = np.abs(y - ref_y).max() / np.abs(ref_y).max()
    es = np.abs(state - ref_s).max() / np.abs(ref_s).max()
    print(f"rows {lens} H {H} P {P} N {N} G {G}: NaN outputs {np.isnan(y).sum()}, "
          f"states {np.isnan(state).sum()}; error {ey:.1e}, state {es:.1e}")
    return ey < 1e-9 and es < 1e-9


def main():
    ok = run([200], 4, 64, 128, 2, 1)
    ok &= run([129, 5, 256], 2, 32, 64, 1, 2)
    ok &= run([300], 2, 128, 128, 1, 3)
    print("all match" if ok else "MISMATCH")


if __name__ == "__main__":
    main()
