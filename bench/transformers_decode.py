#!/usr/bin/env python3
"""Baseline side of the end-to-end decode benchmark: Nemotron-H or Qwen3.5 greedy decode
through transformers' `generate`, as a user of transformers experiences it.

Two subcommands:

  make-checkpoint  writes a random-weight Hugging Face folder (config.json for
                   NemotronHForCausalLM, or Qwen3_5ForCausalLM for the sizes named
                   qwen3_5-*, model.safetensors; no tokenizer files: config.json
                   declares mstar's byte tokenizer, `mstar_tokenizer`, which transformers
                   ignores). `--size 100m` is exactly bench/model_bench.cpp's config_100m();
                   `--size tiny` is a small config for quick CPU checks. Weights are drawn by
                   tests/fixtures/make_nemotron_h.py's `redraw_weights` (unit-gain weights,
                   A_log/D/dt_bias at Mamba-2-like values, dt kept inside the prefill clamp;
                   clear greedy choices, so token dumps can be compared), or with `--init hf`
                   by transformers' own init (normal std 0.02), both deterministic in --seed.
                   Qwen3.5 sizes always take transformers' init (its delta-net A_log and
                   dt_bias are drawn there).

  decode           loads the folder with transformers on --device in --dtype and, per batch
                   size, times `model.generate(input_ids, attention_mask, do_sample=False,
                   max_new_tokens=N, min_new_tokens=N, use_cache=True, pad_token_id=0,
                   eos_token_id=None)` (N tokens) and the same call with N = 1 (prefill plus
                   the first token), with torch.cuda.synchronize() around each call on CUDA.
                   eos_token_id=None: the checkpoint's EOS (id 2) neither stops nor, through
                   min_new_tokens, gets masked out, so greedy ids match mstar-run's (which
                   does not stop at EOS in benchmarks) and every sequence runs N steps.
                   decode tokens/s = batch * (N - 1) / (t_N - t_1). One untimed warm-up per
                   batch size (each shape), then --repeats timed (t_1, t_N) pairs; reported are
                   the MEDIAN over the repeats (decode_tokens_per_s_best is the best repeat).
                   Prompts: random ids in [3, vocab) from numpy's default_rng(--seed), one row
                   per sequence (row 0 is the same for every batch size), no padding.
                   --dump-tokens FILE writes batch 1's greedy ids for row 0 as JSON
                   {"prompt": [...], "generated": [...], ...} to compare with mstar-run.

The Mamba-2 path is what transformers picks: since 5.x each of its five mixer functions
(causal_conv1d_fn / _update, mamba_split_conv1d_scan_combined, selective_state_update,
mamba_chunk_scan_combined) comes from its original package when that imports (mamba_ssm's
Triton modules, causal_conv1d's CUDA extension), else transformers' pure-torch code (much
slower). For Qwen3.5 the gated delta rule runs on flash-linear-attention's Triton kernels when
`fla` imports, the conv on causal_conv1d. The output names, function by function, what
transformers resolved (`kernels`), and sums it up in `mamba_path`.

Where the packages cannot be pip-installed (the GPU machine has no network, and mamba-ssm's
and causal-conv1d's wheels need their CUDA extensions built), decode can take them as
unpacked source trees: `--mamba-src DIR` imports DIR/mamba_ssm as a bare package (its
__init__.py, which imports the selective_scan_cuda extension that transformers' Mamba-2 never
calls, is not run), `--causal-conv1d-src DIR` puts DIR/causal_conv1d on the path and
`--causal-conv1d-ext FILE` loads its compiled causal_conv1d_cuda extension from FILE
(bench/baselines_h200.py --build causal-conv1d makes one; `bench/baselines_prebuilt.sh
causal-conv1d` packs one built here). All three are registered before transformers' modeling module is
imported, which is when it picks.

Run (from the repository root):
    python3 bench/transformers_decode.py make-checkpoint --out /tmp/nemotron_h_100m
    python3 bench/transformers_decode.py decode --model /tmp/nemotron_h_100m \\
        --batch 1 16 64 --prompt-len 32 --new-tokens 128 --device cuda --dtype bfloat16 --json
    # quick CPU check
    python3 bench/transformers_decode.py make-checkpoint --size tiny --out /tmp/nh_tiny --dtype float32
    python3 bench/transformers_decode.py decode --model /tmp/nh_tiny --device cpu \\
        --dtype float32 --batch 1 2 --new-tokens 8 --repeats 1 --json

Exit status 2: the installed transformers lacks the family's classes, or a bad argument.
"""

import argparse
import importlib
import json
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
BYTE_OFFSET = 3  # ids 0, 1, 2 are pad, bos, eos; byte b is id b + 3 (as the fixtures)
MIN_PROMPT_ID = 3

# bench/model_bench.cpp config_100m(); every other field at the C++ / transformers default.
SIZES = {
    "100m": dict(vocab_size=32000, hidden_size=768, num_attention_heads=12, num_key_value_heads=4,
                 head_dim=64, intermediate_size=2048, mamba_num_heads=24, mamba_head_dim=64,
                 ssm_state_size=64, n_groups=2, conv_kernel=4, chunk_size=128,
                 pattern="M-M*M-M-M-M*M-M-"),
    # ~0.6B: hidden 2048 and the 100m pattern, every width scaled with it
    # (issue 14's second size); about 0.59e9 parameters.
    "600m": dict(vocab_size=32000, hidden_size=2048, num_attention_heads=16, num_key_value_heads=4,
                 head_dim=128, intermediate_size=8192, mamba_num_heads=64, mamba_head_dim=64,
                 ssm_state_size=128, n_groups=8, conv_kernel=4, chunk_size=128,
                 pattern="M-M*M-M-M-M*M-M-"),
    # NVIDIA-Nemotron-H-8B-Base-8K's shape (bench/make_checkpoint.py says where each number comes
    # from; it writes this size in seconds where make-checkpoint takes minutes): 8.10e9 parameters.
    "8b": dict(vocab_size=131072, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
               head_dim=128, intermediate_size=21504, mamba_num_heads=128, mamba_head_dim=64,
               ssm_state_size=128, n_groups=8, conv_kernel=4, chunk_size=128,
               max_position_embeddings=8192,
               pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"),
    # tests/fixtures/make_nemotron_h.py's TINY sizes, every layer kind twice.
    "tiny": dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, intermediate_size=128, mamba_num_heads=8, mamba_head_dim=16,
                 ssm_state_size=16, n_groups=2, conv_kernel=4, chunk_size=8,
                 pattern="M-M*M-*-"),
    # Qwen3.5-0.8B's layer widths (delta net 16 key heads x 128, 32 value heads x 128; gated
    # attention 8 heads, 2 KV heads, head_dim 256) with 16 layers (every 4th full attention)
    # and a 151,936-token tied vocabulary: about 0.56e9 parameters.
    "qwen3_5-0.5b": dict(family="qwen3_5", vocab_size=151936, hidden_size=1024,
                         num_hidden_layers=16, full_attention_interval=4,
                         num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                         intermediate_size=3584, linear_num_key_heads=16,
                         linear_num_value_heads=32, linear_key_head_dim=128,
                         linear_value_head_dim=128, tie_word_embeddings=True),
    # head_dim 32: a rotary span of 4 frequency pairs, split t / h / w as 2 / 1 / 1.
    "qwen3_5-tiny": dict(family="qwen3_5", vocab_size=512, hidden_size=64, num_hidden_layers=4,
                         full_attention_interval=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=32, intermediate_size=128,
                         rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                              partial_rotary_factor=0.25,
                                              mrope_section=[2, 1, 1], mrope_interleaved=True),
                         linear_num_key_heads=2, linear_num_value_heads=4,
                         linear_key_head_dim=16, linear_value_head_dim=16,
                         tie_word_embeddings=False),
}

DTYPES = ("bfloat16", "float16", "float32")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fail(msg):
    """A bad argument or a missing prerequisite: the message, exit status 2."""
    log(f"transformers_decode: {msg}")
    sys.exit(2)


CLASSES = {"nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM"),
           "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM")}


def import_stack(family="nemotron_h"):
    """torch and transformers, and transformers' classes of `family`; exit 2 without them."""
    try:
        import torch
        import transformers
    except ImportError as e:
        fail(f"{e}; pip install torch transformers safetensors numpy")
    names = CLASSES[family]
    config_cls = getattr(transformers, names[0], None)
    model_cls = getattr(transformers, names[1], None)
    if config_cls is None or model_cls is None:
        fail(f"transformers {transformers.__version__} has no {names[1]} / {names[0]}; "
             f"install a release that ships it (pip install -U transformers)")
    return torch, transformers, config_cls, model_cls


def family_of(folder):
    """The checkpoint's family from its config.json's model_type."""
    model_type = json.loads((pathlib.Path(folder) / "config.json").read_text()).get("model_type")
    return "qwen3_5" if model_type in ("qwen3_5", "qwen3_5_text") else "nemotron_h"


def torch_dtype(torch, name):
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


# ---------------------------------------------------------------------------------------------
# make-checkpoint


def make_config(config_cls, spec):
    """A NemotronHConfig in the spelling every transformers release with Nemotron-H accepts
    (`hybrid_override_pattern` + `num_hidden_layers`), fields as make_nemotron_h.py sets them."""
    return config_cls(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        hybrid_override_pattern=spec["pattern"], num_hidden_layers=len(spec["pattern"]),
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"], head_dim=spec["head_dim"],
        intermediate_size=spec["intermediate_size"], mlp_hidden_act="relu2",
        mamba_num_heads=spec["mamba_num_heads"], mamba_head_dim=spec["mamba_head_dim"],
        ssm_state_size=spec["ssm_state_size"], n_groups=spec["n_groups"],
        conv_kernel=spec["conv_kernel"], chunk_size=spec["chunk_size"],
        layer_norm_epsilon=1e-5, tie_word_embeddings=False, use_bias=False, mlp_bias=False,
        use_conv_bias=True, max_position_embeddings=spec.get("max_position_embeddings", 4096),
        pad_token_id=0, bos_token_id=1,
        eos_token_id=2)


def fixture_module():
    """tests/fixtures/make_nemotron_h.py, imported (its main() is guarded)."""
    sys.path.insert(0, str(FIXTURES))
    try:
        return importlib.import_module("make_nemotron_h")
    finally:
        sys.path.remove(str(FIXTURES))


def rewrite_config(path, pattern):
    """The published-checkpoint spelling of the layers (older transformers read only that),
    use_mamba_kernels left true (older transformers honour a false one and skip the CUDA
    kernels), and mstar's byte tokenizer, so the folder needs no tokenizer files."""
    cfg = json.loads(path.read_text())
    cfg.pop("layers_block_type", None)
    cfg["hybrid_override_pattern"] = pattern
    cfg["num_hidden_layers"] = len(pattern)
    cfg["use_mamba_kernels"] = True
    cfg["mstar_tokenizer"] = {"type": "bytes", "offset": BYTE_OFFSET}
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def make_qwen3_5_checkpoint(args, spec):
    """A random-weight Qwen3_5ForCausalLM folder, transformers' init, mstar's byte tokenizer
    declared in config.json."""
    torch, transformers, config_cls, model_cls = import_stack("qwen3_5")
    fields = {k: v for k, v in spec.items() if k != "family"}
    config = config_cls(**fields, max_position_embeddings=4096, pad_token_id=0, bos_token_id=1,
                        eos_token_id=2)
    dtype = torch_dtype(torch, args.dtype)
    torch.manual_seed(args.seed)
    model = model_cls(config).eval()
    params = sum(p.numel() for p in model.parameters())
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.to(dtype).save_pretrained(tmp, safe_serialization=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(pathlib.Path(tmp) / name, out / name)
    cfg = json.loads((out / "config.json").read_text())
    cfg["mstar_tokenizer"] = {"type": "bytes", "offset": BYTE_OFFSET}
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = load_model(torch, model_cls, out, dtype)[0]
    if sum(p.numel() for p in ref.parameters()) != params:
        raise RuntimeError("reloaded parameter count differs")
    sizes = {f.name: f.stat().st_size for f in sorted(out.iterdir()) if f.is_file()}
    print(f"wrote {out}: size {args.size}, layers {config.layer_types}, {params:,} parameters "
          f"({params / 1e6:.1f} M), {args.dtype}, init hf, seed {args.seed}, files {sizes}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")


def cmd_make_checkpoint(args):
    if SIZES[args.size].get("family") == "qwen3_5":
        return make_qwen3_5_checkpoint(args, SIZES[args.size])
    torch, transformers, config_cls, model_cls = import_stack()
    import numpy as np

    spec = SIZES[args.size]
    dtype = torch_dtype(torch, args.dtype)
    torch.manual_seed(args.seed)
    model = model_cls(make_config(config_cls, spec)).eval()
    if args.init == "fixture":
        fixture = fixture_module()
        kinds = {getattr(layer, "block_type", None) for layer in model.model.layers}
        if "M" in spec["pattern"] and "linear_attention" not in kinds:
            fail(f"transformers {transformers.__version__} names its Mamba layers "
                 f"{sorted(k for k in kinds if k)}; make_nemotron_h.py's redraw_weights expects "
                 f"'linear_attention' (use --init hf, or a newer transformers)")
        fixture.redraw_weights(model, torch.Generator().manual_seed(args.seed))
        # As the fixtures: round to the on-disk dtype, check dt stays inside the prefill clamp
        # in float32 on exactly those values (prefill clamps dt, the decode step does not).
        model = model.to(dtype).to(torch.float32)
        rng = np.random.default_rng(args.seed)
        probe = rng.integers(MIN_PROMPT_ID, spec["vocab_size"], size=(1, 64))
        with torch.no_grad():
            fixture.check_dt_inside_limits(model, torch.from_numpy(probe))
    params = sum(p.numel() for p in model.parameters())

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.to(dtype).save_pretrained(tmp, safe_serialization=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(pathlib.Path(tmp) / name, out / name)
    rewrite_config(out / "config.json", spec["pattern"])

    # Read back: transformers accepts the folder and sees the same layers and parameters.
    ref = load_model(torch, model_cls, out, dtype)[0]
    if ref.config.hybrid_override_pattern != spec["pattern"]:
        raise RuntimeError(f"reloaded pattern {ref.config.hybrid_override_pattern}")
    if sum(p.numel() for p in ref.parameters()) != params:
        raise RuntimeError("reloaded parameter count differs")
    sizes = {f.name: f.stat().st_size for f in sorted(out.iterdir()) if f.is_file()}
    print(f"wrote {out}: size {args.size}, pattern {spec['pattern']}, {params:,} parameters "
          f"({params / 1e6:.1f} M), {args.dtype}, init {args.init}, seed {args.seed}, "
          f"files {sizes}, transformers {transformers.__version__}, torch {torch.__version__}")


# ---------------------------------------------------------------------------------------------
# decode


def load_model(torch, model_cls, folder, dtype):
    """from_pretrained in `dtype`: `dtype=` (newer transformers), falling back to `torch_dtype=`
    (older); returns (model, the kwarg that worked). Casts if the weights still differ."""
    used = None
    for kwarg in ("dtype", "torch_dtype"):
        try:
            model = model_cls.from_pretrained(str(folder), **{kwarg: dtype})
            used = kwarg
            break
        except TypeError as e:
            log(f"transformers_decode: from_pretrained({kwarg}=...) failed ({e}); trying the other")
    if used is None:
        raise RuntimeError("from_pretrained accepted neither dtype= nor torch_dtype=")
    if next(model.parameters()).dtype != dtype:
        log(f"transformers_decode: from_pretrained({used}=...) gave "
            f"{next(model.parameters()).dtype}; casting to {dtype}")
        model = model.to(dtype)
        used += " (ignored; cast)"
    return model.eval(), used


def register_kernel_packages(args):
    """--mamba-src, --causal-conv1d-src and --causal-conv1d-ext into sys.modules / sys.path,
    before transformers' modeling module imports them; returns what was done, for the log."""
    import importlib.util
    import types
    done = []
    if args.mamba_src:
        pkg_dir = pathlib.Path(args.mamba_src).resolve() / "mamba_ssm"
        init = pkg_dir / "__init__.py"
        if not init.is_file():
            fail(f"--mamba-src {args.mamba_src}: no mamba_ssm/__init__.py there")
        version = re.search(r'__version__\s*=\s*["\']([^"\']+)', init.read_text())
        pkg = types.ModuleType("mamba_ssm")
        pkg.__path__ = [str(pkg_dir)]
        pkg.__file__ = str(init)
        pkg.__version__ = version.group(1) if version else "unknown"
        sys.modules["mamba_ssm"] = pkg
        done.append(f"mamba_ssm {pkg.__version__} from {pkg_dir} as a bare package")
    if args.causal_conv1d_ext:
        ext = pathlib.Path(args.causal_conv1d_ext).resolve()
        if not ext.is_file():
            fail(f"--causal-conv1d-ext {args.causal_conv1d_ext}: no such file")
        import torch  # noqa: F401 - the extension links libtorch, loaded first
        spec = importlib.util.spec_from_file_location("causal_conv1d_cuda", ext)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError as e:
            fail(f"--causal-conv1d-ext {ext}: {e} (built against another torch?)")
        sys.modules["causal_conv1d_cuda"] = module
        done.append(f"causal_conv1d_cuda from {ext}")
    if args.causal_conv1d_src:
        src = pathlib.Path(args.causal_conv1d_src).resolve()
        if not (src / "causal_conv1d" / "__init__.py").is_file():
            fail(f"--causal-conv1d-src {args.causal_conv1d_src}: no causal_conv1d/ package there")
        sys.path.insert(0, str(src))
        done.append(f"causal_conv1d from {src}")
    return done


def resolved_kernels(transformers, family):
    """{function: module it resolved to} for each function of the family's modeling module that
    transformers wraps with a fallback (its `implementation`, else the torch code it wraps):
    what runs, not what merely imports."""
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    found = {}
    for name, fn in vars(module).items():
        code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
        if code is None or not cells or "implementation" not in code.co_freevars:
            continue
        impl = dict(zip(code.co_freevars, cells))["implementation"].cell_contents
        found[name] = getattr(impl, "__module__", None) or type(impl).__name__
    return found


def kernel_path(family, found):
    """One line for `found`: which packages ran, or the torch fallback."""
    torch_code = f"transformers.models.{family}."
    packages = sorted({m.split(".")[0] for m in found.values() if not m.startswith(torch_code)})
    fallback = sorted(n for n, m in found.items() if m.startswith(torch_code))
    if not found:
        return "unknown (no wrapped kernel functions found)"
    if not packages:
        return "torch fallback"
    names = " + ".join(packages)
    return names + (f" (torch fallback: {', '.join(fallback)})" if fallback else "")


def fmt(value, spec):
    """A rate for the table; None (t_N <= t_1) as n/a in the same width."""
    if value is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return f"{'n/a':>{width or 0}}"
    return f"{value:{spec}}"


def prompts(np, seed, batch, length, vocab):
    rng = np.random.default_rng(seed)
    return rng.integers(MIN_PROMPT_ID, vocab, size=(batch, length), dtype=np.int64)


def cmd_decode(args):
    family = family_of(args.model)
    registered = register_kernel_packages(args)
    torch, transformers, _config_cls, model_cls = import_stack(family)
    import numpy as np

    if args.new_tokens < 2:
        fail("--new-tokens must be at least 2 (decode is t_N - t_1)")
    if args.repeats < 1 or args.prompt_len < 1 or min(args.batch) < 1:
        fail("--repeats, --prompt-len and --batch must be positive")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        fail("--device cuda but torch.cuda.is_available() is false")
    device = torch.device(args.device)
    dtype = torch_dtype(torch, args.dtype)
    cuda = device.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)

    model, kwarg = load_model(torch, model_cls, args.model, dtype)
    model = model.to(device)
    vocab = model.config.vocab_size
    packages = resolved_kernels(transformers, family)
    path = kernel_path(family, packages)
    if registered:
        log(f"transformers_decode: registered {'; '.join(registered)}")
    layers = getattr(model.config, "hybrid_override_pattern", None) or getattr(
        model.config, "layer_types", None)
    gpu = torch.cuda.get_device_name(device) if cuda else "cpu"
    attn = getattr(model.config, "_attn_implementation", None)
    params = sum(p.numel() for p in model.parameters())
    log(f"transformers_decode: {args.model}: {params:,} parameters, pattern "
        f"{layers}, {args.dtype} on {args.device} ({gpu}), "
        f"from_pretrained({kwarg}=), attention {attn}, kernels {path} {packages}, "
        f"transformers {transformers.__version__}, torch {torch.__version__}")

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def generate(ids, new_tokens):
        """One timed generate; returns (seconds, sequences)."""
        mask = torch.ones_like(ids)
        sync()
        start = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             use_cache=True, pad_token_id=0, eos_token_id=None)
        sync()
        seconds = time.perf_counter() - start
        if out.shape != (ids.shape[0], ids.shape[1] + new_tokens):
            raise RuntimeError(f"generate returned shape {tuple(out.shape)}, expected "
                               f"{(ids.shape[0], ids.shape[1] + new_tokens)}")
        return seconds, out

    if args.dump_tokens:
        ids = torch.from_numpy(prompts(np, args.seed, 1, args.prompt_len, vocab)).to(device)
        _, out = generate(ids, args.new_tokens)
        doc = {"prompt": ids[0].tolist(), "generated": out[0, args.prompt_len:].tolist(),
               "model": str(args.model), "dtype": args.dtype, "device": args.device,
               "seed": args.seed, "transformers": transformers.__version__,
               "torch": torch.__version__, "mamba_path": path}
        pathlib.Path(args.dump_tokens).write_text(json.dumps(doc) + "\n")
        log(f"transformers_decode: wrote batch-1 greedy tokens to {args.dump_tokens}")

    rows = []
    for batch in args.batch:
        ids = torch.from_numpy(prompts(np, args.seed, batch, args.prompt_len, vocab)).to(device)
        generate(ids, 1)  # warm-up of both shapes: allocator, kernels' autotuning, caches
        generate(ids, args.new_tokens)
        firsts, totals = [], []
        for _ in range(args.repeats):
            firsts.append(generate(ids, 1)[0])
            totals.append(generate(ids, args.new_tokens)[0])
        decodes = [t - f for f, t in zip(firsts, totals)]
        steps = args.new_tokens - 1
        decode_s = statistics.median(decodes)
        best_s = min((d for d in decodes if d > 0), default=0.0)  # a noisy repeat can be <= 0
        if min(decodes) <= 0:
            log(f"transformers_decode: batch {batch}: t_N - t_1 = {decodes}: the machine is "
                f"too noisy or --new-tokens too small; a rate from a non-positive time is null")
        row = {
            "name": "transformers_decode", "batch": batch, "prompt_len": args.prompt_len,
            "new_tokens": args.new_tokens,
            "decode_tokens_per_s": batch * steps / decode_s if decode_s > 0 else None,
            "prefill_s": statistics.median(firsts),
            "step_ms": 1e3 * decode_s / steps,
            "generate_s": statistics.median(totals),
            "decode_tokens_per_s_best": batch * steps / best_s if best_s > 0 else None,
            "stat": "median", "repeats": args.repeats,
            "t1_s": [round(t, 6) for t in firsts], "tN_s": [round(t, 6) for t in totals],
            "dtype": args.dtype,
            "device": args.device, "torch": torch.__version__,
            "transformers": transformers.__version__, "mamba_path": path, "kernels": packages,
            "gpu": gpu,
            "attn_implementation": attn, "params": params,
        }
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            log(f"  batch {batch}: decode {fmt(row['decode_tokens_per_s'], '.1f')} tok/s")
    if not args.json:
        print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
              f"{args.dtype} on {args.device} ({gpu}), kernels {path}, attention {attn}; "
              f"prompt {args.prompt_len}, {args.new_tokens} new tokens, median of "
              f"{args.repeats}")
        print(f"{'batch':>6} {'decode tok/s':>13} {'best tok/s':>11} {'step ms':>9} "
              f"{'prefill s':>10} {'generate s':>11}")
        for r in rows:
            print(f"{r['batch']:>6} {fmt(r['decode_tokens_per_s'], '>13.1f')} "
                  f"{fmt(r['decode_tokens_per_s_best'], '>11.1f')} {r['step_ms']:>9.3f} "
                  f"{r['prefill_s']:>10.4f} {r['generate_s']:>11.4f}")


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    make = sub.add_parser("make-checkpoint", help="write a random-weight Nemotron-H or Qwen3.5 folder",
                          description="Writes config.json and model.safetensors of a "
                          "random-weight NemotronHForCausalLM or Qwen3_5ForCausalLM (byte tokenizer declared in "
                          "config.json) and prints its parameter count.")
    make.add_argument("--out", required=True, help="output folder (created; files overwritten)")
    make.add_argument("--seed", type=int, default=7, help="weight seed (default 7)")
    make.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                      help="on-disk dtype (default bfloat16)")
    make.add_argument("--size", choices=sorted(SIZES), default="100m",
                      help="100m: bench/model_bench.cpp's config_100m (default); tiny: CPU checks")
    make.add_argument("--init", choices=("fixture", "hf"), default="fixture",
                      help="fixture: make_nemotron_h.py's redraw_weights (default); "
                      "hf: transformers' own init (normal std 0.02)")
    make.set_defaults(func=cmd_make_checkpoint)

    dec = sub.add_parser("decode", help="time greedy generate per batch size",
                         description="Times transformers' greedy generate on a checkpoint per "
                         "batch size: decode tokens/s = batch*(N-1)/(t_N - t_1), medians of "
                         "--repeats after one warm-up.")
    dec.add_argument("--model", required=True, help="checkpoint folder")
    dec.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64],
                     help="batch sizes (default 1 16 64)")
    dec.add_argument("--prompt-len", type=int, default=32, help="prompt tokens (default 32)")
    dec.add_argument("--new-tokens", type=int, default=128,
                     help="generated tokens N per sequence, at least 2 (default 128)")
    dec.add_argument("--device", default="cuda", help="torch device (default cuda)")
    dec.add_argument("--dtype", choices=DTYPES, default="bfloat16",
                     help="compute dtype (default bfloat16)")
    dec.add_argument("--repeats", type=int, default=3,
                     help="timed repeats per batch size; the median is reported (default 3)")
    dec.add_argument("--seed", type=int, default=7, help="prompt seed (default 7)")
    dec.add_argument("--threads", type=int, default=0,
                     help="torch CPU threads (default: torch's choice)")
    dec.add_argument("--json", action="store_true", help="one JSON line per batch size")
    dec.add_argument("--dump-tokens", metavar="FILE",
                     help="write batch 1's prompt and greedy ids as JSON")
    dec.add_argument("--mamba-src", metavar="DIR",
                     help="unpacked mamba-ssm source: DIR/mamba_ssm imported as a bare package")
    dec.add_argument("--causal-conv1d-src", metavar="DIR",
                     help="unpacked causal-conv1d source: DIR/causal_conv1d put on the path")
    dec.add_argument("--causal-conv1d-ext", metavar="FILE",
                     help="causal-conv1d's compiled extension (causal_conv1d_cuda*.so)")
    dec.set_defaults(func=cmd_decode)

    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
