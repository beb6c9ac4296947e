"""The libraries one would run instead of our kernels, on the shapes of
mstar-gpu-bench --suite kernels17 (bench/gpu_bench.cpp), under the same case
names so bench/h200_kernels.sh can join the two:

- decode_attention_b<rows>, prefill_attention_<rows>x<L>: PyTorch's fused
  scaled_dot_product_attention on contiguous bf16 K/V ([rows, Hkv, L, D]),
  32 query heads over 8 kv heads, head_dim 128; decode is one query token per
  row over the whole context, prefill causal (is_causal). Each backend forced
  in turn (sdpa_kernel: FLASH_ATTENTION, CUDNN_ATTENTION,
  EFFICIENT_ATTENTION); GQA first through enable_gqa=True, and where the
  backend refuses that, through K/V repeated to the 32 query heads beforehand
  (materialised, outside the timed call): "gqa" says which. A backend
  refusing both is reported as refused, with its reason.
- the same case names, library "flashinfer" (--parts flashinfer): FlashInfer
  0.2.5's paged kernels on bf16 K/V pages of --page-size (16, ours) tokens
  scattered over a [pages, 2, page, Hkv, D] NHD cache. Decode through
  BatchDecodeWithPagedKVCacheWrapper with use_tensor_cores False (backend
  "cuda_cores", its decode kernel) and True ("fa2_tensor_cores", its fa2
  prefill kernel); causal prefill through BatchPrefillWithPagedKVCacheWrapper
  with backend fa2 and fa3 ("auto_picks": what 'auto' takes on the device).
  plan() outside the timing; the graph mode captures the wrapper built with
  use_cuda_graph=True ("graph_form"). Each output checked once against f32
  SDPA on the K/V its pages hold ("max_abs_err"; over 0.05 refuses the
  case). Its JIT modules are compiled by --build flashinfer (no GPU needed)
  into --flashinfer-cache, or carried prebuilt (--flashinfer-prebuilt); the
  timing run compiles nothing (see import_flashinfer).
- ssd_scan_<shape>_<rows>x<L>, ssd_update_<shape>_b<batch>: mamba-ssm's
  Triton kernels, mamba_chunk_scan_combined (chunk 128, dt softplus, D,
  dt_bias, final states returned) and selective_state_update (state f32,
  dt / A / D / dt_bias broadcast over head_dim as Mamba2.step does, slots
  through state_batch_indices), inputs f32 and bf16.
- conv_prefill_<shape>_<rows>x<L>, conv_update_<shape>_b<batch>:
  causal-conv1d's CUDA kernels when its extension can be had (--build
  causal-conv1d compiles its forward and update for sm_90 from the source
  archive, the backward left out; channel-last x
  as our [T, C] layout, SiLU, bias, final states returned; the step on pool
  slots through conv_state_indices), and PyTorch's depthwise conv1d (cuDNN)
  with SiLU and the state copy, and an eager PyTorch step.

Shapes: Nemotron-H ~0.6B (h64: 64 heads) and 8B (h128: 128 heads) Mamba-2
layers, head_dim 64, state 128, 8 groups, conv width 4 over
heads * 64 + 2 * 8 * 128 channels.

mamba-ssm is imported from its unpacked source tree (--mamba-src) as a bare
package: mamba_ssm/__init__.py, which imports the selective_scan_cuda
extension and the model modules, is not run; the Triton modules need only
torch, triton and einops (ssd_combined's causal_conv1d import is guarded).
No compiled module is stubbed.

Timing as bench/fla_delta_rule.py: CUDA events over back-to-back calls,
each case eager and replayed as a CUDA graph, median over rounds
interleaved with a 1 GiB device-to-device copy (bytes read + written per
second, the drift check). One JSON object per line (--json): bench
"baseline", case, library, backend, mode, dtype, us_per_call,
copy_GB_per_s, and GB_per_s / TFLOP_per_s / tokens_per_s where they apply;
refusals as {"case", "library", "backend", "refused"}; notes as {"note"};
--build flashinfer's modules as {"flashinfer_build", "ok", "seconds"}.

  python3 bench/baselines_h200.py [--json] [--parts attention,ssd,conv,flashinfer]
      [--mamba-src DIR] [--causal-conv1d-src DIR] [--flashinfer-src DIR]
      [--flashinfer-cache DIR] [--flashinfer-prebuilt DIR]
      [--build causal-conv1d|flashinfer]
"""

import argparse
import json
import os
import sys
import types

SHAPES = {"h64": 64, "h128": 128}  # label -> heads; head_dim 64, state 128, 8 groups
HEAD_DIM, STATE, GROUPS, WIDTH, CHUNK = 64, 128, 8, 4, 128
HQ, HKV, D = 32, 8, 128


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    ap.add_argument("--parts", default="attention,ssd,conv",
                    help="comma-separated: attention, ssd, conv, flashinfer")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 16, 64, 256],
                    help="decode attention rows")
    ap.add_argument("--context", type=int, default=2048, help="decode attention context")
    ap.add_argument("--prefill-rows", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--prefill-context", type=int, default=2048)
    ap.add_argument("--mamba-batches", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--modes", default="eager,graph", help="eager, graph or both")
    ap.add_argument("--mamba-src", help="unpacked mamba-ssm source tree (holds mamba_ssm/)")
    ap.add_argument("--causal-conv1d-src", help="unpacked causal-conv1d source tree")
    ap.add_argument("--build", choices=["causal-conv1d", "flashinfer"],
                    help="only compile causal-conv1d's extension (sm_90) into --ext-dir, or "
                         "FlashInfer's modules (sm_90a) into --flashinfer-cache; no GPU needed")
    ap.add_argument("--ext-dir", default="/tmp/causal_conv1d_build",
                    help="where causal-conv1d's extension is (or gets) built")
    ap.add_argument("--page-size", type=int, default=16, help="FlashInfer's KV page (ours: 16)")
    ap.add_argument("--flashinfer-src", help="unpacked flashinfer-python sdist (holds flashinfer/)")
    ap.add_argument("--flashinfer-cache", default="/tmp/flashinfer_build",
                    help="FlashInfer's build folder: --build writes ops/<module>.so there, "
                         "the timing run loads them from there")
    ap.add_argument("--flashinfer-prebuilt",
                    help="a folder of FlashInfer module .so files built elsewhere (same torch, "
                         "CUDA major, sm_90a), loaded where --flashinfer-cache has none")
    return ap.parse_args()


class Out:
    def __init__(self, as_json):
        self.as_json = as_json

    def emit(self, r):
        if self.as_json:
            print(json.dumps(r), flush=True)
        elif "note" in r:
            print(f"note: {r['note']}", flush=True)
        elif "flashinfer_build" in r:
            how = "ok" if r["ok"] else f"FAILED: {r['error']}"
            print(f"flashinfer build {r['flashinfer_build']:12s} {r['seconds']:7.1f} s  {how}",
                  flush=True)
        elif "refused" in r:
            print(f"{r['case']:28s} {r['library']}/{r['backend']}: refused: {r['refused']}",
                  flush=True)
        else:
            rate = (f"{r['TFLOP_per_s']:8.1f} TFLOP/s" if "TFLOP_per_s" in r
                    else f"{r.get('GB_per_s', 0):8.1f} GB/s")
            print(f"{r['case']:28s} {r['library']:16s} {r['backend']:22s} {r['dtype']:9s} "
                  f"{r['mode']:6s} {r['us_per_call']:10.1f} us {rate}  "
                  f"copy {r['copy_GB_per_s']:7.1f}", flush=True)


# ---- timing (as bench/fla_delta_rule.py) ----

def time_ms(torch, fn, reps):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def measure(torch, fn, copy, rounds):
    fn()  # compile / autotune / warm up
    torch.cuda.synchronize()
    probe = time_ms(torch, fn, 3)
    reps = max(3, min(200, int(20.0 / max(probe, 1e-3))))
    cprobe = time_ms(torch, copy, 1)
    creps = max(3, min(200, int(5.0 / max(cprobe, 1e-3))))
    ms, cms = [], []
    for _ in range(rounds):
        ms.append(time_ms(torch, fn, reps))
        cms.append(time_ms(torch, copy, creps))
    ms.sort()
    cms.sort()
    return ms[len(ms) // 2], cms[len(cms) // 2]


def graphed(torch, fn):
    """fn captured in a CUDA graph (no Python launch overhead), or None."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph.replay
    except Exception as e:  # noqa: BLE001 - report and carry on eager
        print(f"graph capture failed: {str(e).splitlines()[0] if str(e) else e!r}",
              file=sys.stderr, flush=True)
        return None


class Runner:
    """Times each case in each mode and emits its line."""

    def __init__(self, torch, args, out):
        self.torch, self.args, self.out = torch, args, out
        gen = torch.Generator(device="cuda").manual_seed(7)
        self.src = torch.rand(256 << 20, device="cuda", generator=gen)  # 1 GiB of f32
        self.dst = torch.empty_like(self.src)
        self.copy_bytes = 2 * self.src.numel() * 4
        self.modes = [m for m in args.modes.split(",") if m]

    def copy(self):
        self.dst.copy_(self.src)

    def run(self, case, fn, fields, bytes_moved=None, flops=None, tokens=None, graph_fn=None):
        """graph_fn: what to capture for the graph mode where it is not fn
        (a library's CUDA-graph form of the call); its lines say
        "graph_form": true."""
        fns = {"eager": fn}
        if "graph" in self.modes:
            fns["graph"] = graphed(self.torch, graph_fn or fn)
        for mode in self.modes:
            f = fns.get(mode)
            if f is None:
                continue
            ms, cms = measure(self.torch, f, self.copy, self.args.rounds)
            r = {"bench": "baseline", "case": case, **fields, "mode": mode,
                 "us_per_call": ms * 1e3,
                 "copy_GB_per_s": self.copy_bytes / (cms * 1e-3) / 1e9}
            if mode == "graph" and graph_fn is not None:
                r["graph_form"] = True
            if bytes_moved is not None:
                r["GB_per_s"] = bytes_moved / (ms * 1e-3) / 1e9
                r["ratio_to_copy"] = r["GB_per_s"] / r["copy_GB_per_s"]
            if flops is not None:
                r["TFLOP_per_s"] = flops / (ms * 1e-3) / 1e12
            if tokens is not None:
                r["tokens_per_s"] = tokens / (ms * 1e-3)
            self.out.emit(r)

    def refused(self, case, library, backend, err):
        msg = " ".join(str(err).split())[:300] or repr(err)
        self.out.emit({"bench": "baseline", "case": case, "library": library,
                       "backend": backend, "refused": msg})


def dtype_name(dt):
    return str(dt).replace("torch.", "")


# ---- attention: PyTorch SDPA ----

def attention(torch, run, args):
    import warnings
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    gen = torch.Generator(device="cuda").manual_seed(11)
    bf16 = torch.bfloat16

    def rand(*shape):
        return (torch.rand(*shape, device="cuda", generator=gen) * 2 - 1).to(bf16)

    def one_case(case, q, k, v, causal, flops, kv_bytes, tokens):
        group = HQ // HKV
        for name, backend in backends:
            reasons = []
            for gqa in ("enable_gqa", "repeat"):
                kk, vv = (k, v) if gqa == "enable_gqa" else (
                    k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))
                extra = {"enable_gqa": True} if gqa == "enable_gqa" else {}

                def fn(kk=kk, vv=vv, extra=extra, backend=backend):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal,
                                                              **extra)

                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the refusal reasons come as warnings
                        fn()
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    reasons.append(f"{gqa}: {e}")
                    continue
                fields = {"library": "torch_sdpa", "backend": name, "gqa": gqa,
                          "dtype": "bfloat16", "rows": q.shape[0], "context": k.shape[2]}
                run.run(case, fn, fields, bytes_moved=kv_bytes, flops=flops, tokens=tokens)
                break
            else:
                run.refused(case, "torch_sdpa", name, " | ".join(reasons))
            del kk, vv

    L = args.context
    for rows in args.rows:
        q = rand(rows, HQ, 1, D)
        k = rand(rows, HKV, L, D)
        v = rand(rows, HKV, L, D)
        kv_bytes = 2.0 * rows * L * HKV * D * 2
        flops = 4.0 * D * HQ * rows * L
        one_case(f"decode_attention_b{rows}", q, k, v, False, flops, kv_bytes, rows)
        del q, k, v
    L = args.prefill_context
    for rows in args.prefill_rows:
        q = rand(rows, HQ, L, D)
        k = rand(rows, HKV, L, D)
        v = rand(rows, HKV, L, D)
        kv_bytes = 2.0 * rows * L * HKV * D * 2 + 2.0 * rows * L * HQ * D * 2
        flops = 4.0 * D * HQ * rows * L * (L + 1) / 2
        one_case(f"prefill_attention_{rows}x{L}", q, k, v, True, flops, kv_bytes, rows * L)
        del q, k, v
    torch.cuda.empty_cache()


# ---- attention: FlashInfer's paged kernels ----

# FlashInfer (flashinfer-python) 0.2.5 from its source archive: the 2.5 MB
# sdist with 3rdparty/cutlass, pure Python plus CUDA sources its jit/ package
# compiles on first use with torch.utils.cpp_extension (ninja, nvcc). Only the
# four modules these cases load are built, each for one dtype (bf16 q, K/V
# and out, int32 page indices), head_dim 128, no RoPE, sliding window or soft
# cap, for sm_90a: label -> (generator, its arguments) in flashinfer.jit.
FI_VERSION = "0.2.5"
FI_ARCH = "9.0a"  # TORCH_CUDA_ARCH_LIST: sm_90a, which the fa3 kernels need
FI_TOL = 0.05  # max abs error against SDPA that fails a case (outputs are O(0.5))
FI_QSCALE = 8.0  # q in [-8, 8): logits of std ~2.7, a peaked softmax (see fi_check)


def fi_modules(torch):
    bf16 = torch.bfloat16
    common = (bf16, bf16, bf16, torch.int32, D, D, 0, False, False)
    return [("decode", "gen_batch_decode_module", common),
            ("prefill_fa2", "gen_batch_prefill_module", ("fa2", *common, False)),
            ("page", None, ()),  # flashinfer.page: the fa3 run's page-to-token offsets
            ("prefill_fa3", "gen_batch_prefill_module", ("fa3", *common, False))]


def nvcc_version(torch):
    import re
    import subprocess
    from torch.utils.cpp_extension import CUDA_HOME
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else "nvcc"
    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def import_flashinfer(torch, args, out, build=False):
    """Imports flashinfer from the unpacked sdist (--flashinfer-src) with its
    module loader replaced: building (build), the modules compile as
    flashinfer would, with the patch below, and each .so is copied to
    <cache>/ops; timing, each module is loaded from <cache>/ops or
    --flashinfer-prebuilt, nothing compiled (a missing one refuses its cases).
    Returns (flashinfer, where each loaded module came from)."""
    src = os.path.abspath(args.flashinfer_src)
    pkg = os.path.join(src, "flashinfer")
    if not os.path.isdir(pkg):
        raise RuntimeError(f"--flashinfer-src {src}: no flashinfer/ folder")
    # The sdist maps flashinfer.data to its root and flashinfer.data.cutlass
    # to 3rdparty/cutlass (pyproject's package-dir); jit/env.py looks for the
    # headers and sources there. Links, as its editable install makes them
    # (custom_backend.py), made before the import (jit/core.py would create
    # an empty data/csrc).
    data = os.path.join(pkg, "data")
    os.makedirs(data, exist_ok=True)
    for name, target in (("csrc", "csrc"), ("include", "include"),
                         ("cutlass", "3rdparty/cutlass"), ("tvm_binding", "tvm_binding")):
        link = os.path.join(data, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(src, target), link)
    cache = os.path.abspath(args.flashinfer_cache)
    ops = os.path.join(cache, "ops")
    os.makedirs(ops, exist_ok=True)
    # Generated sources and ninja build folders go under the cache, not $HOME;
    # the arch list also stops jit/env.py and cpp_extension asking a GPU.
    os.environ["FLASHINFER_WORKSPACE_BASE"] = os.path.join(cache, "workspace")
    os.environ["TORCH_CUDA_ARCH_LIST"] = FI_ARCH
    sys.path.insert(0, src)
    import flashinfer
    import flashinfer.jit.core as core
    if flashinfer.__version__ != FI_VERSION:
        out.emit({"bench": "baseline", "note": f"flashinfer {flashinfer.__version__} from {src}, "
                                               f"not the {FI_VERSION} this was written for"})
    original = core.load_cuda_ops
    # Patch 1: CUDA 12.8+ nvcc defaults to -static-global-template-stub=true,
    # which makes each translation unit's __global__ template instances
    # internal; flashinfer instantiates its kernels in one file
    # (batch_*_kernel*.cu) and launches them from another (batch_*.cu), so
    # the link fails ("undefined hidden symbol ...Kernel<...>"). The flag
    # turned off restores the earlier behaviour (later flashinfer versions
    # pass it themselves).
    fix = ["-static-global-template-stub=false"] if nvcc_version(torch) >= (12, 8) else []
    where = {}

    def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
             extra_include_paths=None):
        if build:
            mod = original(name, sources, extra_cflags, list(extra_cuda_cflags or []) + fix,
                           extra_ldflags, extra_include_paths)
            import shutil
            dest = os.path.join(ops, f"{name}.so")  # whole or absent, should a timeout strike
            shutil.copy2(os.path.join(core.FLASHINFER_JIT_DIR, name, f"{name}.so"), dest + ".part")
            os.replace(dest + ".part", dest)
            where[name] = ops
            return mod
        dirs = [ops] + ([os.path.abspath(args.flashinfer_prebuilt)]
                        if args.flashinfer_prebuilt else [])
        why = []
        for d in dirs:
            so = os.path.join(d, f"{name}.so")
            made = fi_build_info(d).get("torch")
            if not os.path.exists(so):
                why.append(f"none in {d}")
            elif made != torch.__version__:  # another libtorch ABI: not loaded
                why.append(f"{d}'s built against torch {made}, this is {torch.__version__}")
            else:
                torch.ops.load_library(so)  # registers torch.ops.<name> (TORCH_LIBRARY)
                where[name] = d
                return getattr(torch.ops, name)
        raise FileNotFoundError(f"{'; '.join(why)} (--build flashinfer makes it): {name}")

    # Every flashinfer module that imported the loader by name.
    for mod in list(sys.modules.values()):
        if (getattr(mod, "__name__", "").startswith("flashinfer")
                and getattr(mod, "load_cuda_ops", None) is original):
            mod.load_cuda_ops = load
    return flashinfer, where


def fi_build_info(ops):
    """<ops>/build.json: what the modules there were built with."""
    try:
        with open(os.path.join(ops, "build.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def build_flashinfer(torch, args, out):
    """Compiles the modules of fi_modules in turn (no GPU needed), each one's
    seconds and outcome a line; a failure does not stop the next. Records in
    <cache>/ops/build.json the torch, CUDA and nvcc versions (a module loads
    only under the torch it was built with) and each module's seconds."""
    import time
    fi, where = import_flashinfer(torch, args, out, build=True)
    import flashinfer.jit as jit
    import flashinfer.page as page
    out.emit({"bench": "baseline", "note": f"flashinfer {fi.__version__}: building for sm_90a "
              f"with nvcc {'.'.join(map(str, nvcc_version(torch)))}, torch {torch.__version__}, "
              f"MAX_JOBS {os.environ.get('MAX_JOBS', 'unset')}, into "
              f"{os.path.join(os.path.abspath(args.flashinfer_cache), 'ops')}"})
    ops = os.path.join(os.path.abspath(args.flashinfer_cache), "ops")
    info = {"flashinfer": fi.__version__, "torch": torch.__version__, "cuda": torch.version.cuda,
            "nvcc": ".".join(map(str, nvcc_version(torch))), "arch": FI_ARCH,
            "max_jobs": os.environ.get("MAX_JOBS"), "modules": {}}
    failed = 0
    for label, gen, gen_args in fi_modules(torch):
        t0 = time.time()
        try:
            if gen is None:
                page._page_module = None
                page.get_page_module()
            else:
                getattr(jit, gen)(*gen_args)
            ok, err = True, None
        except Exception as e:  # noqa: BLE001 - the next module may still build
            ok, err = False, " ".join(str(e).split())[-600:]
            failed += 1
        r = {"flashinfer_build": label, "ok": ok, "seconds": round(time.time() - t0, 1),
             **({"error": err} if err else {})}
        info["modules"][label] = r
        with open(os.path.join(ops, "build.json"), "w") as f:
            json.dump(info, f, indent=1)
        out.emit({"bench": "baseline", **r})
    return failed


def fi_paged(torch, gen, rows, L, page_size):
    """rows rows of L cached tokens on page_size-token pages scattered over
    a [pages, 2, page_size, Hkv, D] bf16 NHD cache (FlashInfer's one-tensor
    layout): (cache, indptr, indices, last_page_len), int32, on the GPU."""
    per_row = (L + page_size - 1) // page_size
    pages = rows * per_row
    cache = ((torch.rand(pages, 2, page_size, HKV, D, device="cuda", generator=gen) * 2 - 1)
             .to(torch.bfloat16))
    indices = torch.randperm(pages, device="cuda", generator=gen).to(torch.int32)
    indptr = torch.arange(rows + 1, device="cuda", dtype=torch.int32) * per_row
    last = torch.full((rows,), L - (per_row - 1) * page_size, device="cuda", dtype=torch.int32)
    return cache, indptr, indices, last


def fi_check(torch, got, q, cache, indices, per_row, L, causal):
    """Max abs difference between a FlashInfer output ([tokens, Hq, D], bf16)
    and f32 SDPA (math backend, GQA) on the same q and the K/V its pages hold,
    a row at a time. q is scaled so the softmax is peaked (a few keys carry
    each output, |out| ~ 0.5): a wrong mask, head group or page gives errors
    of that order, bf16 rounding a few 1e-3."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = indices.numel() // per_row
    per_q = q.shape[0] // rows
    err = 0.0
    for r in range(rows):
        kv = cache[indices[r * per_row:(r + 1) * per_row].long()]  # [pages, 2, P, Hkv, D]
        kv = kv.float().transpose(0, 1).reshape(2, -1, HKV, D)[:, :L].permute(0, 2, 1, 3)
        qr = q[r * per_q:(r + 1) * per_q].float().transpose(0, 1)[None]  # [1, Hq, n, D]
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(qr, kv[0][None], kv[1][None],
                                                 is_causal=causal, enable_gqa=True)
        diff = float((got[r * per_q:(r + 1) * per_q].float().transpose(0, 1)[None] - ref).abs().max())
        if diff != diff:  # NaN: an output left unwritten (checked() fills it with NaN first)
            return float("inf")
        err = max(err, diff)
    return err


def flashinfer_attention(torch, run, args, out):
    """BatchDecodeWithPagedKVCacheWrapper (use_tensor_cores False and True)
    and BatchPrefillWithPagedKVCacheWrapper (causal; fa2 and fa3) on the
    decode and prefill shapes, pages of --page-size tokens, NHD. plan() once
    outside the timing; eager: run() into a preallocated out; graph: the
    wrapper built with use_cuda_graph=True (fixed index buffers), its run()
    captured. Each output checked once against SDPA (fi_check)."""
    try:
        fi, where = import_flashinfer(torch, args, out)
        from flashinfer.utils import determine_attention_backend
    except Exception as e:  # noqa: BLE001 - every case refused with the reason
        for rows in args.rows:
            run.refused(f"decode_attention_b{rows}", "flashinfer", "import", e)
        for rows in args.prefill_rows:
            run.refused(f"prefill_attention_{rows}x{args.prefill_context}", "flashinfer",
                        "import", e)
        return
    bf16 = torch.bfloat16
    dev = torch.device("cuda")
    auto = determine_attention_backend(dev, 0, False, False, bf16, bf16)
    out.emit({"bench": "baseline", "note": f"flashinfer {fi.__version__} from "
              f"{os.path.abspath(args.flashinfer_src)}; prefill backend 'auto' picks {auto} here"})
    gen = torch.Generator(device="cuda").manual_seed(31)
    P = args.page_size

    def workspace(mib=128):
        return torch.empty(mib << 20, dtype=torch.uint8, device="cuda")

    def attempt(case, backend, body):
        try:
            body()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a refusal, never the whole script
            run.refused(case, "flashinfer", backend, f"{type(e).__name__}: {e}")

    def checked(fns, q, cache, indices, per_row, L, causal):
        """Runs each (fn, out) once and checks out; the worst error, or raises."""
        worst = 0.0
        for fn, o in fns:
            o.fill_(float("nan"))
            got = fn()
            torch.cuda.synchronize()
            # What run() returns is checked: a backend that ignores out= returns its own tensor.
            got = got if torch.is_tensor(got) else o
            worst = max(worst, fi_check(torch, got, q, cache, indices, per_row, L, causal))
        if not worst <= FI_TOL:  # NaN fails too
            raise RuntimeError(f"output differs from SDPA: max abs error {worst:.3g} > {FI_TOL}")
        return worst

    def time_wrappers(case, w, wg, q, cache, indices, per_row, L, causal, fields, kv_bytes,
                      flops, tokens):
        """Checks then times a planned wrapper's run() (eager) and its CUDA-graph
        twin's (captured), each into its own preallocated output."""
        o, og = torch.empty_like(q), torch.empty_like(q)

        def fn():
            return w.run(q, cache, out=o)

        def gfn():
            return wg.run(q, cache, out=og)

        err = checked([(fn, o), (gfn, og)], q, cache, indices, per_row, L, causal)
        fields = {"library": "flashinfer", **fields, "dtype": "bfloat16", "context": L,
                  "page_size": P, "layout": "NHD", "max_abs_err": err}
        run.run(case, fn, fields, bytes_moved=kv_bytes, flops=flops, tokens=tokens, graph_fn=gfn)

    L = args.context
    for rows in args.rows:
        case = f"decode_attention_b{rows}"
        cache, indptr, indices, last = fi_paged(torch, gen, rows, L, P)
        per_row = indices.numel() // rows
        q = ((torch.rand(rows, HQ, D, device="cuda", generator=gen) * 2 - 1) * FI_QSCALE).to(bf16)
        kv_bytes = 2.0 * rows * L * HKV * D * 2
        flops = 4.0 * D * HQ * rows * L
        for tc in (False, True):
            backend = "fa2_tensor_cores" if tc else "cuda_cores"

            def body(tc=tc, backend=backend):
                plan = (indptr, indices, last, HQ, HKV, D, P)
                kw = {"q_data_type": bf16, "kv_data_type": bf16}
                w = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_tensor_cores=tc)
                w.plan(*plan, **kw)
                wg = fi.BatchDecodeWithPagedKVCacheWrapper(
                    workspace(), "NHD", use_cuda_graph=True, use_tensor_cores=tc,
                    paged_kv_indptr_buffer=indptr.clone(), paged_kv_indices_buffer=indices.clone(),
                    paged_kv_last_page_len_buffer=last.clone())
                wg.plan(*plan, **kw)
                time_wrappers(case, w, wg, q, cache, indices, per_row, L, False,
                              {"backend": backend, "use_tensor_cores": tc, "rows": rows},
                              kv_bytes, flops, rows)

            attempt(case, backend, body)
    L = args.prefill_context
    for rows in args.prefill_rows:
        case = f"prefill_attention_{rows}x{L}"
        cache, indptr, indices, last = fi_paged(torch, gen, rows, L, P)
        per_row = indices.numel() // rows
        q = ((torch.rand(rows * L, HQ, D, device="cuda", generator=gen) * 2 - 1)
             * FI_QSCALE).to(bf16)
        qo = torch.arange(rows + 1, device="cuda", dtype=torch.int32) * L
        kv_bytes = 2.0 * rows * L * HKV * D * 2 + 2.0 * rows * L * HQ * D * 2
        flops = 4.0 * D * HQ * rows * L * (L + 1) / 2
        for backend in ("fa2", "fa3"):

            def body(backend=backend):
                plan = (qo, indptr, indices, last, HQ, HKV, D, P)
                kw = {"causal": True, "q_data_type": bf16, "kv_data_type": bf16}
                w = fi.BatchPrefillWithPagedKVCacheWrapper(workspace(2048), "NHD", backend=backend)
                w.plan(*plan, **kw)
                wg = fi.BatchPrefillWithPagedKVCacheWrapper(
                    workspace(2048), "NHD", use_cuda_graph=True, qo_indptr_buf=qo.clone(),
                    paged_kv_indptr_buf=indptr.clone(), paged_kv_indices_buf=indices.clone(),
                    paged_kv_last_page_len_buf=last.clone(), backend=backend)
                wg.plan(*plan, **kw)
                time_wrappers(case, w, wg, q, cache, indices, per_row, L, True,
                              {"backend": backend, "auto_picks": auto, "rows": rows},
                              kv_bytes, flops, rows * L)

            attempt(case, backend, body)
    for name, d in sorted(where.items()):
        out.emit({"bench": "baseline", "note": f"flashinfer module {name} loaded from {d}"})
    torch.cuda.empty_cache()


# ---- Mamba-2 SSD: mamba-ssm's Triton kernels ----

def import_mamba(src, out):
    """mamba_chunk_scan_combined and selective_state_update from mamba-ssm,
    or (None, None) with a note."""
    if src:
        pkg_dir = os.path.join(os.path.abspath(src), "mamba_ssm")
        if not os.path.isdir(pkg_dir):
            out.emit({"bench": "baseline", "note": f"--mamba-src {src}: no mamba_ssm/ folder"})
            return None, None
        pkg = types.ModuleType("mamba_ssm")
        pkg.__path__ = [pkg_dir]
        pkg.__file__ = os.path.join(pkg_dir, "__init__.py")
        sys.modules["mamba_ssm"] = pkg
        how = (f"mamba_ssm imported from {pkg_dir} as a bare package (its __init__.py, "
               "which imports selective_scan_cuda, not run; no compiled module stubbed)")
    else:
        how = "mamba_ssm imported as installed"
    try:
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception as e:  # noqa: BLE001 - report what failed and go on
        out.emit({"bench": "baseline", "note": f"mamba_ssm Triton modules not importable: "
                                               f"{type(e).__name__}: {e}"})
        return None, None
    out.emit({"bench": "baseline", "note": how})
    return mamba_chunk_scan_combined, selective_state_update


def ssd(torch, run, args, chunk_scan, state_update):
    gen = torch.Generator(device="cuda").manual_seed(23)

    def rand(*shape):
        return torch.rand(*shape, device="cuda", generator=gen) * 2 - 1

    L = args.prefill_context
    for label, H in SHAPES.items():
        A = -torch.exp(rand(H))
        D_skip, dt_bias = rand(H), rand(H)
        for dtype in (torch.float32, torch.bfloat16):
            fields = {"library": "mamba_ssm_triton", "dtype": dtype_name(dtype)}
            for rows in args.prefill_rows:
                x = rand(rows, L, H, HEAD_DIM).to(dtype)
                dt = rand(rows, L, H).to(dtype)
                B = rand(rows, L, GROUPS, STATE).to(dtype)
                C = rand(rows, L, GROUPS, STATE).to(dtype)

                def scan(x=x, dt=dt, B=B, C=C):
                    return chunk_scan(x, dt, A, B, C, CHUNK, D=D_skip, dt_bias=dt_bias,
                                      dt_softplus=True, return_final_states=True)

                esz = x.element_size()
                moved = (rows * L * (2 * H * HEAD_DIM + 2 * GROUPS * STATE + H) * esz
                         + rows * H * HEAD_DIM * STATE * 4)
                run.run(f"ssd_scan_{label}_{rows}x{L}", scan,
                        {**fields, "backend": "mamba_chunk_scan_combined"},
                        bytes_moved=moved, tokens=rows * L)
                del x, dt, B, C
            for batch in args.mamba_batches:
                state = rand(batch, H, HEAD_DIM, STATE)
                slots = torch.randperm(batch, device="cuda", generator=gen).to(torch.int32)
                x = rand(batch, H, HEAD_DIM).to(dtype)
                dt = rand(batch, H).to(dtype)[:, :, None].expand(batch, H, HEAD_DIM)
                B = rand(batch, GROUPS, STATE).to(dtype)
                C = rand(batch, GROUPS, STATE).to(dtype)
                A3 = A[:, None, None].expand(H, HEAD_DIM, STATE)
                D2 = D_skip[:, None].expand(H, HEAD_DIM)
                bias2 = dt_bias[:, None].expand(H, HEAD_DIM)

                def step(state=state, x=x, dt=dt, B=B, C=C, slots=slots):
                    return state_update(state, x, dt, A3, B, C, D=D2, dt_bias=bias2,
                                        dt_softplus=True, state_batch_indices=slots)

                esz = x.element_size()
                moved = (2 * state.numel() * 4
                         + batch * (2 * H * HEAD_DIM + 2 * GROUPS * STATE + H) * esz)
                run.run(f"ssd_update_{label}_b{batch}", step,
                        {**fields, "backend": "selective_state_update"},
                        bytes_moved=moved, tokens=batch)
                del state, x, dt, B, C
    torch.cuda.empty_cache()


# ---- causal conv: causal-conv1d, PyTorch ----

# Stands in for csrc/causal_conv1d_bwd.cu, whose one translation unit takes
# minutes to compile and is never called here: the backward entry points the
# extension's binding references, each stopping the process if called.
NO_BWD = """#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "causal_conv1d.h"
template <typename I, typename W>
void causal_conv1d_bwd_cuda(ConvParamsBwd&, cudaStream_t) {
  std::fprintf(stderr, "causal_conv1d: backward not built for this benchmark\\n");
  std::abort();
}
template <typename I, typename W>
void causal_conv1d_channellast_bwd_cuda(ConvParamsBwd& p, cudaStream_t s) {
  causal_conv1d_bwd_cuda<I, W>(p, s);
}
"""


def cc1d_sources(src, ext_dir):
    csrc = os.path.join(os.path.abspath(src), "csrc")
    types_ = ("float", "at::Half", "at::BFloat16")
    inst = [f"template void causal_conv1d{kind}_bwd_cuda<{i}, {w}>(ConvParamsBwd&, cudaStream_t);"
            for kind in ("", "_channellast") for w in types_ for i in types_]
    stub = os.path.join(ext_dir, "causal_conv1d_no_bwd.cu")
    text = NO_BWD + "\n".join(inst) + "\n"
    if not os.path.exists(stub) or open(stub).read() != text:
        with open(stub, "w") as f:
            f.write(text)
    return csrc, [os.path.join(csrc, "causal_conv1d.cpp"),
                  os.path.join(csrc, "causal_conv1d_fwd.cu"),
                  os.path.join(csrc, "causal_conv1d_update.cu"), stub]


def build_cc1d(torch, src, ext_dir, out):
    """Compiles causal-conv1d's extension, forward and update only, for sm_90
    (its setup.py's nvcc flags, one architecture) with
    torch.utils.cpp_extension.load."""
    from torch.utils.cpp_extension import load
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    os.makedirs(ext_dir, exist_ok=True)
    csrc, sources = cc1d_sources(src, ext_dir)
    flags = ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
             "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
             "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
             "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
             "--threads", "4"]
    mod = load(name="causal_conv1d_cuda", sources=sources, extra_cflags=["-O3"],
               extra_cuda_cflags=flags, extra_include_paths=[csrc], build_directory=ext_dir,
               verbose=False)
    out.emit({"bench": "baseline", "note": f"causal_conv1d_cuda (forward and update; backward "
                                           f"left out) built for sm_90 in {ext_dir}"})
    return mod


def import_cc1d(torch, args, out):
    """causal_conv1d_fn and causal_conv1d_update, or (None, None) with a note."""
    try:
        if args.causal_conv1d_src:
            sys.path.insert(0, os.path.abspath(args.causal_conv1d_src))
            built = os.path.join(args.ext_dir, "causal_conv1d_cuda.so")
            if os.path.exists(built):  # load() then only checks the build is current
                sys.modules["causal_conv1d_cuda"] = build_cc1d(torch, args.causal_conv1d_src,
                                                               args.ext_dir, out)
        from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
    except Exception as e:  # noqa: BLE001 - its absence is a result
        out.emit({"bench": "baseline", "note": f"causal_conv1d not available: "
                                               f"{type(e).__name__}: {e}"})
        return None, None
    return causal_conv1d_fn, causal_conv1d_update


def conv(torch, run, args, cc_fn, cc_update):
    import torch.nn.functional as F
    gen = torch.Generator(device="cuda").manual_seed(29)

    def rand(*shape):
        return torch.rand(*shape, device="cuda", generator=gen) * 2 - 1

    L = args.prefill_context
    for label, H in SHAPES.items():
        Cn = H * HEAD_DIM + 2 * GROUPS * STATE
        for dtype in (torch.float32, torch.bfloat16):
            weight = rand(Cn, WIDTH).to(dtype)
            bias = rand(Cn).to(dtype)
            esz = weight.element_size()
            for rows in args.prefill_rows:
                case = f"conv_prefill_{label}_{rows}x{L}"
                moved = 2.0 * rows * L * Cn * esz + rows * Cn * (WIDTH - 1) * esz
                x_cl = rand(rows, L, Cn).to(dtype).transpose(1, 2)  # [T, C] memory, as ours
                if cc_fn is not None:
                    def cc(x=x_cl):
                        return cc_fn(x, weight, bias, return_final_states=True,
                                     activation="silu")
                    run.run(case, cc, {"library": "causal_conv1d", "backend": "causal_conv1d_fn",
                                       "dtype": dtype_name(dtype)}, bytes_moved=moved,
                            tokens=rows * L)
                x_cf = x_cl.contiguous()  # channel-first, as cuDNN's depthwise conv likes
                w3 = weight[:, None, :]

                def tc(x=x_cf):
                    y = F.silu(F.conv1d(x, w3, bias, padding=WIDTH - 1, groups=Cn)[..., :L])
                    return y, x[..., L - (WIDTH - 1):].contiguous()

                run.run(case, tc, {"library": "torch", "backend": "conv1d_depthwise",
                                   "dtype": dtype_name(dtype)}, bytes_moved=moved,
                        tokens=rows * L)
                del x_cl, x_cf
            for batch in args.mamba_batches:
                case = f"conv_update_{label}_b{batch}"
                moved = 2.0 * batch * Cn * esz + 2.0 * batch * Cn * (WIDTH - 1) * esz
                x = rand(batch, Cn).to(dtype)
                state = rand(batch, Cn, WIDTH - 1).to(dtype)
                slots = torch.randperm(batch, device="cuda", generator=gen).to(torch.int32)
                if cc_update is not None:
                    def ccu(x=x, state=state, slots=slots):
                        return cc_update(x, state, weight, bias, activation="silu",
                                         conv_state_indices=slots)
                    run.run(case, ccu, {"library": "causal_conv1d",
                                        "backend": "causal_conv1d_update",
                                        "dtype": dtype_name(dtype)}, bytes_moved=moved,
                            tokens=batch)
                idx = slots.long()

                def tu(x=x, state=state, idx=idx):
                    window = torch.cat([state[idx], x[:, :, None]], dim=-1)
                    y = F.silu((window * weight).sum(-1) + bias)
                    state[idx] = window[..., 1:]
                    return y

                run.run(case, tu, {"library": "torch", "backend": "eager_step",
                                   "dtype": dtype_name(dtype)}, bytes_moved=moved, tokens=batch)
                del x, state
    torch.cuda.empty_cache()


def main():
    args = parse_args()
    out = Out(args.json)
    import torch
    if args.build == "causal-conv1d":
        if not args.causal_conv1d_src:
            sys.exit("--build causal-conv1d needs --causal-conv1d-src")
        build_cc1d(torch, args.causal_conv1d_src, args.ext_dir, out)
        return
    if args.build == "flashinfer":
        if not args.flashinfer_src:
            sys.exit("--build flashinfer needs --flashinfer-src")
        sys.exit(1 if build_flashinfer(torch, args, out) else 0)
    parts = set(args.parts.split(","))
    if "flashinfer" in parts and not args.flashinfer_src:
        sys.exit("--parts flashinfer needs --flashinfer-src")
    if not torch.cuda.is_available():
        sys.exit("baselines_h200: no CUDA device")
    import triton
    out.emit({"bench": "baseline", "note": f"torch {torch.__version__}, triton "
              f"{triton.__version__}, {torch.cuda.get_device_name()}, cudnn "
              f"{torch.backends.cudnn.version()}"})
    run = Runner(torch, args, out)
    with torch.inference_mode():
        if "attention" in parts:
            attention(torch, run, args)
        if "flashinfer" in parts:
            flashinfer_attention(torch, run, args, out)
        if "ssd" in parts:
            chunk_scan, state_update = import_mamba(args.mamba_src, out)
            if chunk_scan is not None:
                ssd(torch, run, args, chunk_scan, state_update)
        if "conv" in parts:
            cc_fn, cc_update = import_cc1d(torch, args, out)
            conv(torch, run, args, cc_fn, cc_update)


if __name__ == "__main__":
    main()
