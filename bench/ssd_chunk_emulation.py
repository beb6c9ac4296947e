"""Host emulation of the chunked SSD scan (kernels/cuda/ssd_chunked.cu and
ssd_chunk_recurrence.cu) against the sequential scan (kernels/cpu/ssd.cpp's
recurrence), one head in float64, and again with every product's operands
rounded to TF32 as the tensor cores round them: the chunk's own end state
(x w)^T B, M = C B^T, and [M | e^G C] [x ; h0^T]; the state walk adds in
full precision. Inputs drawn as tests/gpu/gpu_recurrent_test.cpp draws them.
Prints the normalised errors (max |diff| / max |ref|) of the outputs and the
final state per row length and chunk size.

  python3 bench/ssd_chunk_emulation.py      (needs numpy)
"""

import numpy as np

P, N = 64, 128


def tf32(x):
    """x rounded to TF32 (10 explicit mantissa bits, round half away), as float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def mm(a, b, low):
    return tf32(a) @ tf32(b) if low else a @ b


def sequential(x, dt, a, B, C, D, state):
    s = state.copy()
    y = np.empty_like(x)
    for t in range(len(x)):
        s = np.exp(dt[t] * a) * s + dt[t] * np.outer(x[t], B[t])
        y[t] = s @ C[t] + D * x[t]
    return y, s


def chunked(x, dt, a, B, C, D, state, L, low):
    h = state.copy()
    y = np.empty_like(x)
    for c0 in range(0, len(x), L):
        xc, Bc, Cc, dc = x[c0:c0 + L], B[c0:c0 + L], C[c0:c0 + L], dt[c0:c0 + L]
        cum = np.cumsum(dc * a)
        w = np.exp(cum[-1] - cum) * dc
        own = mm((xc * w[:, None]).T, Bc, low)  # chunk_state
        ratio = np.exp(cum[:, None] - cum[None, :])
        m = np.tril(mm(Cc, Bc.T, low) * ratio * dc[None, :])
        gc = np.exp(cum)[:, None] * Cc
        y[c0:c0 + L] = mm(m, xc, low) + mm(gc, h.T, low) + D * xc  # chunk_output
        h = np.exp(cum[-1]) * h + own  # state_pass
    return y, h


def err(got, ref):
    return np.abs(got - ref).max() / np.abs(ref).max()


def main():
    rng = np.random.default_rng(503)
    print("len  chunk  f64 out / state      tf32 out / state")
    for n in (65, 200, 1000, 2048):
        raw = rng.uniform(-2, 2, n)
        bias = rng.uniform(-1, 1)
        a = -np.exp(rng.uniform(-1, 1.5))
        v = raw + bias
        dt = np.clip(np.where(v > 20, v, np.log1p(np.exp(v))), 1e-3, 10.0)
        x = rng.uniform(-2, 2, (n, P))
        B = rng.uniform(-2, 2, (n, N))
        C = rng.uniform(-2, 2, (n, N))
        D = rng.uniform(-1, 1)
        state = rng.uniform(-0.5, 0.5, (P, N))
        ref_y, ref_s = sequential(x, dt, a, B, C, D, state)
        for L in (64, 128):
            e = [err(*pair) for low in (False, True)
                 for pair in zip(chunked(x, dt, a, B, C, D, state, L, low), (ref_y, ref_s))]
            print(f"{n:4d}  {L:5d}  {e[0]:.1e} / {e[1]:.1e}      {e[2]:.1e} / {e[3]:.1e}")


if __name__ == "__main__":
    main()
