"""flash-linear-attention's Triton gated delta rule on the shapes of
mstar-gpu-bench --delta-rule-only (bench/gpu_bench.cpp): Qwen3.5-0.8B-like
heads (16 key heads, 32 value heads, 128 x 128 f32 state per value head),
decode (fused_recurrent, one token per sequence, batch 1 / 16 / 64) and a
4,096-token prefill (chunk, 1 and 4 sequences), each call doing what our
kernel does: q / k L2 norm, the decay and beta from the raw a / b inputs
(use_gate_in_kernel, use_beta_sigmoid_in_kernel), state in [HV, V, K]
(state_v_first), resumed and returned. A device-to-device copy through
torch is timed in the same run (bytes read + written per second).

  python3 bench/fla_delta_rule.py [--json] [--prefill-only | --decode-only] [--f32-only]   (needs fla-core, torch, triton)

Prints one line per case: median us per call over interleaved rounds with
the copy, and for decode the state bytes read + written per second; each
case eager (Python launches) and replayed as a CUDA graph. Decode also
"inplace-graphN": fla's kernel writing the final state over the initial one,
as ours does (the API writes a fresh tensor: see in_place).
"""

import argparse
import json

import torch
import triton
from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd_kernel

HK, HV, DK, DV = 16, 32, 128, 128


def time_ms(fn, reps):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def measure(fn, copy, rounds):
    fn()  # compile / warm up
    torch.cuda.synchronize()
    probe = time_ms(fn, 3)
    reps = max(3, min(200, int(20.0 / max(probe, 1e-3))))
    cprobe = time_ms(copy, 1)
    creps = max(3, min(200, int(5.0 / max(cprobe, 1e-3))))
    ms, cms = [], []
    for _ in range(rounds):
        ms.append(time_ms(fn, reps))
        cms.append(time_ms(copy, creps))
    ms.sort()
    cms.sort()
    return ms[len(ms) // 2], cms[len(cms) // 2]


def graphed(fn, calls=1):
    """`calls` back-to-back calls of fn captured in one CUDA graph (no Python
    launch overhead; with many calls, none of the replay's either), or None."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        return graph.replay
    except Exception as e:  # noqa: BLE001 - report and carry on eager
        print(f"graph capture failed: {e}", flush=True)
        return None


def inputs(rows, tokens, dtype, gen):
    dev = "cuda"
    q = torch.rand(rows, tokens, HK, DK, device=dev, generator=gen) * 2 - 1
    k = torch.rand(rows, tokens, HK, DK, device=dev, generator=gen) * 2 - 1
    v = torch.rand(rows, tokens, HV, DV, device=dev, generator=gen) * 2 - 1
    a = torch.rand(rows, tokens, HV, device=dev, generator=gen) * 2 - 1
    b = torch.rand(rows, tokens, HV, device=dev, generator=gen) * 2 - 1
    a_log = torch.rand(HV, device=dev, generator=gen) * 2 - 1
    dt_bias = torch.rand(HV, device=dev, generator=gen) * 2 - 1
    h0 = torch.rand(rows, HV, DV, DK, device=dev, generator=gen) * 2 - 1
    return [x.to(dtype) for x in (q, k, v)] + [a, b, a_log, dt_bias, h0]


def in_place(q, k, v, a, b, a_log, dt_bias, h0):
    """fla's decode kernel launched as its Python API launches it, but with
    the final state written over the initial one (ht = h0), as a serving
    engine's state pool is updated and as ours is; the API itself always
    returns a fresh final-state tensor, so its calls read one buffer and
    write another. Each program reads its state tile before it writes it,
    and no two programs share a tile, so in place is safe."""
    rows, tokens, hk, dk = k.shape
    hv, dv = v.shape[2], v.shape[3]
    bv = min(8, triton.next_power_of_2(dv))
    o = torch.empty_like(v)
    grid = (triton.cdiv(dv, bv) * rows * hv,)

    def call():
        fused_recurrent_gated_delta_rule_fwd_kernel[grid](
            q=q, k=k, v=v, g=a, gk=None, gv=None, beta=b, A_log=a_log, dt_bias=dt_bias, o=o,
            h0=h0, ht=h0, cu_seqlens=None, scale=dk ** -0.5, T=tokens, H=hk, HV=hv, K=dk, V=dv,
            BK=triton.next_power_of_2(dk), BV=bv, IS_BETA_HEADWISE=b.ndim != v.ndim,
            USE_QK_L2NORM_IN_KERNEL=True, APPLY_BETA_SIGMOID=True, ALLOW_NEG_EIGVAL=False,
            STATE_V_FIRST=True, num_warps=1, num_stages=3)
        return o, h0

    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--prefill-only", action="store_true", help="skip the decode cases")
    ap.add_argument("--decode-only", action="store_true", help="skip the prefill cases")
    ap.add_argument("--f32-only", action="store_true", help="skip the bfloat16 inputs")
    ap.add_argument("--graph-calls", type=int, default=20,
                    help="calls captured in one graph for the 'graphN' mode (as mstar-gpu-bench "
                         "--graphs times ours)")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(7)
    src = torch.rand(256 << 20, device="cuda", generator=gen)  # 1 GiB of f32
    dst = torch.empty_like(src)
    copy_bytes = 2 * src.numel() * 4

    def copy():
        dst.copy_(src)

    results = []

    def report(name, ms, cms, state_bytes, tokens, dtype, mode):
        r = {
            "bench": "fla",
            "name": name,
            "mode": mode,
            "dtype": str(dtype).replace("torch.", ""),
            "us_per_call": ms * 1e3,
            "tokens_per_s": tokens / (ms * 1e-3),
            "state_GB_per_s": state_bytes / (ms * 1e-3) / 1e9,
            "copy_GB_per_s": copy_bytes / (cms * 1e-3) / 1e9,
        }
        r["ratio_to_copy"] = r["state_GB_per_s"] / r["copy_GB_per_s"]
        results.append(r)
        print(json.dumps(r) if args.json else
              f"{name:28s} {r['dtype']:9s} {mode:6s} {r['us_per_call']:10.1f} us  "
              f"{r['state_GB_per_s']:8.1f} GB/s  copy {r['copy_GB_per_s']:7.1f}  "
              f"ratio {r['ratio_to_copy']:.3f}", flush=True)

    for dtype in (torch.float32,) if args.f32_only else (torch.float32, torch.bfloat16):
        for rows in () if args.prefill_only else (1, 16, 64):
            q, k, v, a, b, a_log, dt_bias, h0 = inputs(rows, 1, dtype, gen)

            def decode():
                return fused_recurrent_gated_delta_rule(
                    q, k, v, g=a, beta=b, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=a_log,
                    dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True, state_v_first=True)

            # The in-place launch must give the API's outputs and state.
            o_api, h_api = decode()
            h_keep = h0.clone()
            o_own, h_own = in_place(q, k, v, a, b, a_log, dt_bias, h0)()
            gap = max((o_own - o_api).abs().max().item(), (h_own - h_api).abs().max().item())
            h0.copy_(h_keep)
            if gap > 1e-5:
                raise SystemExit(f"fla in place differs from its API by {gap} at b{rows}")
            n = args.graph_calls
            inplace = in_place(q, k, v, a, b, a_log, dt_bias, h0)
            for mode, fn, calls in (("eager", decode, 1), ("graph", graphed(decode), 1),
                                    (f"graph{n}", graphed(decode, n), n),
                                    (f"inplace-graph{n}", graphed(inplace, n), n)):
                if fn is not None:
                    ms, cms = measure(fn, copy, args.rounds)
                    ms /= calls
                    report(f"delta_rule_decode_b{rows}", ms, cms, 2 * h0.numel() * 4, rows,
                           dtype, mode)
        for rows in () if args.decode_only else (1, 4):
            q, k, v, a, b, a_log, dt_bias, h0 = inputs(rows, 4096, dtype, gen)

            def prefill():
                return chunk_gated_delta_rule(
                    q, k, v, g=a, beta=b, initial_state=h0, output_final_state=True,
                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=a_log,
                    dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True, state_v_first=True)

            n = max(1, args.graph_calls // 4)
            for mode, fn, calls in (("eager", prefill, 1), ("graph", graphed(prefill), 1),
                                    (f"graph{n}", graphed(prefill, n), n)):
                if fn is not None:
                    ms, cms = measure(fn, copy, args.rounds)
                    ms /= calls
                    report(f"delta_rule_prefill_{rows}x4096", ms, cms, 2 * h0.numel() * 4,
                           rows * 4096, dtype, mode)


if __name__ == "__main__":
    main()
