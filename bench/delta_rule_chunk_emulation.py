"""Host emulation of the chunked gated delta rule (kernels/cuda/delta_rule_chunked.cu)
against the sequential rule (kernels/cpu/delta_rule.cpp's recurrence), one value
head in float64, and again with every product's operands rounded to TF32 as the
tensor cores round them. Prints the normalised errors (max |diff| / max |ref|) of
the outputs and the final state for several row lengths, for the kernels' split
("split": the walk carries only the state, W and U1 pre-scaled by e^{G_C - G_t},
and stores each chunk's starting state; the outputs O = Oi + Qe S_c^T come after,
from the stored states) and for the earlier one ("inline": U, then O, then the
state, per chunk in the walk).

  python3 bench/delta_rule_chunk_emulation.py      (needs numpy)
"""

import numpy as np

K, V, C = 128, 128, 64


def tf32(x):
    """x rounded to TF32 (10 explicit mantissa bits, round half away), as float64."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def mm(a, b, low):
    return tf32(a) @ tf32(b) if low else a @ b


def sequential(q, k, v, g, beta, state):
    s = state.copy()
    out = []
    for t in range(len(q)):
        s *= np.exp(g[t])
        u = beta[t] * (v[t] - s @ k[t])
        s += np.outer(u, k[t])
        out.append(s @ q[t])
    return np.array(out), s


def prepare(qc, kc, vc, gc, bc, low):
    """One chunk's parallel half: W, U1, Qe, Oi, the decays (chunk_prepare)."""
    n = len(qc)
    cum = np.cumsum(gc)
    gamma = np.exp(cum)
    ratio = np.exp(cum[:, None] - cum[None, :])
    a = np.tril(bc[:, None] * ratio * mm(kc, kc.T, low), -1)
    p = np.tril(ratio * mm(qc, kc.T, low))
    inv = np.linalg.inv(np.eye(n) + a)
    w = inv @ ((bc * gamma)[:, None] * kc)
    u1 = inv @ (bc[:, None] * vc)
    qe = gamma[:, None] * qc - mm(p, w, low)
    oi = mm(p, u1, low)
    e = np.exp(cum[-1] - cum)
    return w, u1, qe, oi, e, gamma[-1]


def chunked_inline(q, k, v, g, beta, state, low):
    s = state.copy()
    out = []
    for c0 in range(0, len(q), C):
        w, u1, qe, oi, e, gamma_c = prepare(q[c0:c0 + C], k[c0:c0 + C], v[c0:c0 + C],
                                            g[c0:c0 + C], beta[c0:c0 + C], low)
        u = u1 - mm(w, s.T, low)
        out.append(oi + mm(qe, s.T, low))
        s = gamma_c * s + mm((e[:, None] * u).T, k[c0:c0 + C], low)
    return np.concatenate(out), s


def chunked_split(q, k, v, g, beta, state, low):
    s = state.copy()
    parts = []
    for c0 in range(0, len(q), C):
        w, u1, qe, oi, e, gamma_c = prepare(q[c0:c0 + C], k[c0:c0 + C], v[c0:c0 + C],
                                            g[c0:c0 + C], beta[c0:c0 + C], low)
        # chunk_recurrence: S_c stored, then U' = e U1 - (e W) S^T, S = gamma_C S + U'^T K.
        parts.append((qe, oi, s.copy()))
        u_e = e[:, None] * u1 - mm(e[:, None] * w, s.T, low)
        s = gamma_c * s + mm(u_e.T, k[c0:c0 + C], low)
    # chunk_output, every chunk at once.
    out = [oi + mm(qe, s_c.T, low) for qe, oi, s_c in parts]
    return np.concatenate(out), s


def main():
    rng = np.random.default_rng(5)
    for length in (1, 63, 64, 65, 200, 1000, 4096):
        q = rng.uniform(-1, 1, (length, K))
        k = rng.uniform(-1, 1, (length, K))
        v = rng.uniform(-1, 1, (length, V))
        q /= np.linalg.norm(q, axis=1, keepdims=True) * np.sqrt(K)
        k /= np.linalg.norm(k, axis=1, keepdims=True)
        a = rng.uniform(-3, 3, length)
        b = rng.uniform(-3, 3, length)
        g = -np.exp(0.3) * np.log1p(np.exp(a + 0.2))
        beta = 1 / (1 + np.exp(-b))
        s0 = rng.uniform(-0.5, 0.5, (V, K))
        o_ref, s_ref = sequential(q, k, v, g, beta, s0)
        for name, fn in (("split", chunked_split), ("inline", chunked_inline)):
            errs = []
            for low in (False, True):
                o, s = fn(q, k, v, g, beta, s0, low)
                errs += [np.abs(o - o_ref).max() / np.abs(o_ref).max(),
                         np.abs(s - s_ref).max() / np.abs(s_ref).max()]
            print("%5d tokens %-6s  f64: out %.1e state %.1e   tf32: out %.1e state %.1e"
                  % (length, name, *errs))


if __name__ == "__main__":
    main()
