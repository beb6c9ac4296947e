"""Host emulation of the chunked SSD scan (kernels/cuda/ssd_chunked.cu,
ssd_chunk_recurrence.cu, ssd_chunk_staged*.cu) against the sequential scan
(kernels/cpu/ssd.cpp's recurrence), for the heads of one group sharing B
and C. Every product's operands are rounded to TF32 as the tensor cores
round them and summed in float32 (the kernels' f32 accumulators): C B^T
once per group (chunk_cb), the chunk's own end state (x w)^T B
(chunk_state), then per head (e^G C) h0^T + M x + D x with M formed in
float32 from the group's C B^T (chunk_output); the state walk adds in
float32. `v1` is the previous output step (ssd-parallel: C B^T per head and
one product [M | e^G C] [x ; h0^T], operands in float64 otherwise), for
comparison. Inputs drawn as tests/gpu/gpu_recurrent_test.cpp draws them.
Prints the normalised errors (max |diff| / max |ref| over the group's
heads) of the outputs and the final states per row length and chunk size.

  python3 bench/ssd_chunk_emulation.py      (needs numpy)
"""

import numpy as np

P, N, HEADS = 64, 128, 2


def tf32(x):
    """x rounded to TF32 (10 explicit mantissa bits, round half away), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32)


def mm(a, b):
    """A tensor-core product: TF32 operands, float32 sums."""
    return tf32(a) @ tf32(b)


def sequential(x, dt, a, B, C, D, state):
    s = state.copy()
    y = np.empty_like(x)
    for t in range(len(x)):
        s = np.exp(dt[t] * a) * s + dt[t] * np.outer(x[t], B[t])
        y[t] = s @ C[t] + D * x[t]
    return y, s


def chunked_v2(heads, B, C, L):
    """heads: (x, dt, a, D, state) per head; B, C shared (one group)."""
    f = np.float32
    B, C = B.astype(f), C.astype(f)
    hs = [st.astype(f) for (_, _, _, _, st) in heads]
    ys = [np.empty(x.shape, f) for (x, _, _, _, _) in heads]
    for c0 in range(0, len(B), L):
        Bc, Cc = B[c0:c0 + L], C[c0:c0 + L]
        cb = mm(Cc, Bc.T)  # chunk_cb: once for the group
        for k, (x, dt, a, D, _) in enumerate(heads):
            xc, dc = x[c0:c0 + L].astype(f), dt[c0:c0 + L].astype(f)
            cum = np.cumsum(dc * f(a), dtype=f)
            w = np.exp(cum[-1] - cum) * dc
            own = mm((xc * w[:, None]).T, Bc)  # chunk_state
            m = np.tril(cb * np.exp(np.tril(cum[:, None] - cum[None, :])) * dc[None, :])
            acc = mm(np.exp(cum)[:, None] * Cc, hs[k].T)  # chunk_output phase 1
            acc += mm(m, xc)  # phase 2
            ys[k][c0:c0 + L] = acc + f(D) * xc
            hs[k] = np.exp(cum[-1]) * hs[k] + own  # state_pass
    return ys, hs


def chunked_v1(x, dt, a, B, C, D, state, L):
    def mm64(p, q):
        return tf32(p).astype(np.float64) @ tf32(q).astype(np.float64)

    h = state.copy()
    y = np.empty_like(x)
    for c0 in range(0, len(x), L):
        xc, Bc, Cc, dc = x[c0:c0 + L], B[c0:c0 + L], C[c0:c0 + L], dt[c0:c0 + L]
        cum = np.cumsum(dc * a)
        w = np.exp(cum[-1] - cum) * dc
        own = mm64((xc * w[:, None]).T, Bc)
        m = np.tril(mm64(Cc, Bc.T) * np.exp(np.tril(cum[:, None] - cum[None, :])) * dc[None, :])
        y[c0:c0 + L] = mm64(np.hstack([m, np.exp(cum)[:, None] * Cc]), np.vstack([xc, h.T])) + D * xc
        h = np.exp(cum[-1]) * h + own
    return y, h


def err(got, ref):
    return max(np.abs(g - r).max() for g, r in zip(got, ref)) / max(np.abs(r).max() for r in ref)


def main():
    rng = np.random.default_rng(503)
    print(f"P {P}, N {N}, {HEADS} heads sharing B and C")
    print("len  chunk  v2 out / state      v1 out / state")
    for n in (65, 200, 1000, 2048):
        B = rng.uniform(-2, 2, (n, N))
        C = rng.uniform(-2, 2, (n, N))
        heads = []
        for _ in range(HEADS):
            raw = rng.uniform(-2, 2, n)
            v = raw + rng.uniform(-1, 1)
            dt = np.clip(np.where(v > 20, v, np.log1p(np.exp(v))), 1e-3, 10.0)
            a = -np.exp(rng.uniform(-1, 1.5))
            heads.append((rng.uniform(-2, 2, (n, P)), dt, a, rng.uniform(-1, 1),
                          rng.uniform(-0.5, 0.5, (P, N))))
        refs = [sequential(x, dt, a, B, C, D, st) for (x, dt, a, D, st) in heads]
        ref_y, ref_s = [r[0] for r in refs], [r[1] for r in refs]
        for L in (64, 128):
            ys, hs = chunked_v2(heads, B, C, L)
            old = [chunked_v1(x, dt, a, B, C, D, st, L) for (x, dt, a, D, st) in heads]
            e = (err(ys, ref_y), err(hs, ref_s), err([o[0] for o in old], ref_y),
                 err([o[1] for o in old], ref_s))
            print(f"{n:4d}  {L:5d}  {e[0]:.1e} / {e[1]:.1e}      {e[2]:.1e} / {e[3]:.1e}")


if __name__ == "__main__":
    main()
