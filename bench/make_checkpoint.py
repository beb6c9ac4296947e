#!/usr/bin/env python3
"""Random-weight Nemotron-H checkpoints at benchmark sizes, written tensor by tensor.

    python3 bench/make_checkpoint.py --size nemotron_h-8b --out /tmp/nh8b
    python3 bench/make_checkpoint.py --size tiny --out /tmp/nh-tiny --device cpu

transformers_decode.py's make-checkpoint builds the model in transformers and saves it: right
for the sizes it compares against, slow at 8B (the whole model in float32 on the host, then a
copy). This script needs only torch: each tensor is drawn (on CUDA when there is one, else on
the CPU) in float32, rounded to the on-disk dtype and written at once into a safetensors file
whose header was laid out before the first byte of data, so the host holds one tensor at a
time. Files are sharded as Hugging Face shards them (model-0000i-of-0000n.safetensors and
model.safetensors.index.json) beyond --shard-gb; models/safetensors_checkpoint.cpp reads both.

The values follow tests/fixtures/make_nemotron_h.py's redraw_weights (what transformers_decode.py
--init fixture uses), which are the ones that matter for a decode benchmark: norms 1 + N(0, 0.2);
A_log = log(U[1, 16]); D = U[0.5, 1.5]; dt_bias = softplus^-1(dt), dt log-uniform in
[0.05, 0.2]; conv filters N(0, 1/W); biases N(0, 0.1); embeddings N(0, 1); lm_head
N(0, 16/hidden) (clear greedy choices); every other matrix N(0, 1/fan_in), the dt rows of each
in_proj scaled by 0.3 (dt stays inside the prefill clamp, so prefill and decode agree).

config.json is written as transformers' NemotronHConfig reads it (the published spelling,
hybrid_override_pattern + num_hidden_layers) with mstar's byte tokenizer declared, as
transformers_decode.py writes it, so the folder needs no tokenizer files.

--no-weights writes the headers and leaves the data as holes (a sparse file of zeros): enough
for `mstar-tool memory-plan`, which reads only the headers, in seconds and no disk.
"""

import argparse
import json
import math
import os
import pathlib
import struct
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from transformers_decode import BYTE_OFFSET, SIZES  # noqa: E402  (light: no torch at import)

# NVIDIA-Nemotron-H-8B-Base-8K's config.json (huggingface.co/nvidia/NVIDIA-Nemotron-H-8B-Base-8K):
# hidden_size 4096, 52 layers of its hybrid_override_pattern (24 Mamba-2, 4 attention, 24 MLP),
# 128 Mamba heads of 64 with a 128-wide state in 8 groups, conv kernel 4, MLP 21504 (relu2),
# 32 query / 8 KV heads of 128, vocabulary 131072, 8K context. transformers 5.24's
# NemotronHConfig defaults are the same numbers (vocab_size, hidden_size, heads, head_dim,
# intermediate_size, mamba_*, n_groups, ssm_state_size, conv_kernel); the pattern and the
# context come from the published config. Kept in transformers_decode.py's SIZES as "8b".
NEMOTRON_H_8B = SIZES["8b"]

CHECKPOINT_SIZES = {
    "tiny": SIZES["tiny"],
    "nemotron_h-100m": SIZES["100m"],
    # transformers_decode.py's "600m": hidden 2048 on the 100m pattern (0.59e9 counted; the
    # issue's "0.56B" Nemotron-H).
    "nemotron_h-0.56b": SIZES["600m"],
    "nemotron_h-8b": NEMOTRON_H_8B,
}

DTYPES = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}


def tensors_of(spec):
    """[(name, shape, rule)] in the order transformers saves them; the rule picks the draw."""
    hid, pattern = spec["hidden_size"], spec["pattern"]
    heads, hd = spec["mamba_num_heads"], spec["mamba_head_dim"]
    d_inner = heads * hd
    conv_dim = d_inner + 2 * spec["n_groups"] * spec["ssm_state_size"]
    in_proj = d_inner + conv_dim + heads  # z, xBC, dt
    qd = spec["num_attention_heads"] * spec["head_dim"]
    kvd = spec["num_key_value_heads"] * spec["head_dim"]
    out = [("backbone.embeddings.weight", (spec["vocab_size"], hid), "embedding")]
    for i, kind in enumerate(pattern):
        p = f"backbone.layers.{i}."
        out.append((p + "norm.weight", (hid,), "norm"))
        m = p + "mixer."
        if kind == "M":
            out += [(m + "A_log", (heads,), "A_log"), (m + "D", (heads,), "D"),
                    (m + "dt_bias", (heads,), "dt_bias"),
                    (m + "conv1d.weight", (conv_dim, 1, spec["conv_kernel"]), "conv"),
                    (m + "conv1d.bias", (conv_dim,), "bias"),
                    (m + "in_proj.weight", (in_proj, hid), "in_proj"),
                    (m + "norm.weight", (d_inner,), "norm"),
                    (m + "out_proj.weight", (hid, d_inner), "matrix")]
        elif kind == "*":
            out += [(m + "q_proj.weight", (qd, hid), "matrix"),
                    (m + "k_proj.weight", (kvd, hid), "matrix"),
                    (m + "v_proj.weight", (kvd, hid), "matrix"),
                    (m + "o_proj.weight", (hid, qd), "matrix")]
        elif kind == "-":
            out += [(m + "up_proj.weight", (spec["intermediate_size"], hid), "matrix"),
                    (m + "down_proj.weight", (hid, spec["intermediate_size"]), "matrix")]
        else:
            raise SystemExit(f"make_checkpoint: layer kind {kind!r} is not supported")
    out.append(("backbone.norm_f.weight", (hid,), "norm"))
    out.append(("lm_head.weight", (spec["vocab_size"], hid), "lm_head"))
    return out


def draw(torch, rule, shape, gen, device, spec):
    """One tensor in float32 by make_nemotron_h.py's redraw_weights rules."""
    def randn(std):
        return torch.randn(shape, generator=gen, device=device) * std

    def rand():
        return torch.rand(shape, generator=gen, device=device)

    if rule == "norm":
        return 1.0 + randn(0.2)
    if rule == "A_log":
        return torch.log(rand() * 15.0 + 1.0)
    if rule == "D":
        return rand() + 0.5
    if rule == "dt_bias":
        dt = torch.exp(rand() * math.log(4.0) + math.log(0.05))
        return dt + torch.log(-torch.expm1(-dt))  # softplus^-1(dt), dt in [0.05, 0.2]
    if rule == "conv":
        return randn(1.0 / math.sqrt(spec["conv_kernel"]))
    if rule == "bias":
        return randn(0.1)
    if rule == "embedding":
        return randn(1.0)
    if rule == "lm_head":
        return randn(4.0 / math.sqrt(shape[1]))
    w = randn(1.0 / math.sqrt(shape[1]))
    if rule == "in_proj":
        w[-spec["mamba_num_heads"]:] *= 0.3
    return w


def shard_plan(tensors, element, shard_bytes):
    """Tensors split into files of at most shard_bytes (one tensor may exceed it alone)."""
    shards, current, size = [], [], 0
    for t in tensors:
        nbytes = math.prod(t[1]) * element
        if current and size + nbytes > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += nbytes
    if current:
        shards.append(current)
    return shards


def header_of(tensors, dtype_name, element):
    """The safetensors header (JSON, padded with spaces to 8 bytes) and the data's size."""
    entries, offset = {}, 0
    for name, shape, _ in tensors:
        nbytes = math.prod(shape) * element
        entries[name] = {"dtype": dtype_name, "shape": list(shape),
                         "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    entries["__metadata__"] = {"format": "pt"}
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return text, offset


def write_shard(path, tensors, args, spec, torch, device, first_index):
    dtype_name, element = DTYPES[args.dtype]
    header, data_bytes = header_of(tensors, dtype_name, element)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        if args.no_weights:
            f.truncate(8 + len(header) + data_bytes)
            return data_bytes
        out_dtype = getattr(torch, args.dtype)
        for k, (name, shape, rule) in enumerate(tensors):
            # One generator per tensor, seeded by its place: the values do not depend on the
            # sharding, and a tensor can be redrawn alone.
            gen = torch.Generator(device=device).manual_seed(args.seed * 1_000_003 + first_index + k)
            t = draw(torch, rule, shape, gen, device, spec).to(out_dtype).contiguous()
            raw = t.view(torch.uint8) if element == 1 else t.view(torch.int16 if element == 2
                                                                  else torch.int32)
            f.write(raw.cpu().numpy().tobytes())
    return data_bytes


def config_of(spec):
    """config.json as transformers_decode.py writes it (make_config, then rewrite_config)."""
    return {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "vocab_size": spec["vocab_size"], "hidden_size": spec["hidden_size"],
        "hybrid_override_pattern": spec["pattern"], "num_hidden_layers": len(spec["pattern"]),
        "num_attention_heads": spec["num_attention_heads"],
        "num_key_value_heads": spec["num_key_value_heads"], "head_dim": spec["head_dim"],
        "intermediate_size": spec["intermediate_size"], "mlp_hidden_act": "relu2",
        "mamba_num_heads": spec["mamba_num_heads"], "mamba_head_dim": spec["mamba_head_dim"],
        "ssm_state_size": spec["ssm_state_size"], "n_groups": spec["n_groups"],
        "conv_kernel": spec["conv_kernel"], "chunk_size": spec["chunk_size"], "expand": 2,
        "mamba_hidden_act": "silu", "mamba_ssm_cache_dtype": "float32",
        "time_step_min": 0.001, "time_step_max": 0.1, "time_step_floor": 1e-4,
        "time_step_limit": [0.0, {"__float__": "Infinity"}],
        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False, "use_bias": False,
        "mlp_bias": False, "use_conv_bias": True, "attention_bias": False,
        "rescale_prenorm_residual": True, "residual_in_fp32": False,
        "max_position_embeddings": spec.get("max_position_embeddings", 4096),
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "use_cache": True,
        "use_mamba_kernels": True, "mstar_tokenizer": {"type": "bytes", "offset": BYTE_OFFSET},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", required=True, choices=sorted(CHECKPOINT_SIZES))
    ap.add_argument("--out", required=True, help="folder to write (created)")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="where to draw: cuda or cpu (default: cuda "
                    "when torch sees one)")
    ap.add_argument("--shard-gb", type=float, default=5.0,
                    help="largest file in GB (10^9 bytes); one file when everything fits")
    ap.add_argument("--no-weights", action="store_true",
                    help="headers only, data left as holes (for mstar-tool memory-plan)")
    args = ap.parse_args()
    spec = CHECKPOINT_SIZES[args.size]
    if spec.get("family", "nemotron_h") != "nemotron_h":
        raise SystemExit(f"make_checkpoint: {args.size} is not a Nemotron-H size")
    torch = None
    device = "cpu"
    if not args.no_weights:
        import torch  # noqa: F811  (only when drawing)
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    start = time.perf_counter()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = tensors_of(spec)
    _, element = DTYPES[args.dtype]
    shards = shard_plan(tensors, element, int(args.shard_gb * 1e9))
    for stale in list(out.glob("model*.safetensors")) + list(out.glob("model.safetensors.index.json")):
        stale.unlink()
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    total, index, first = 0, {}, 0
    for name, shard in zip(names, shards):
        total += write_shard(out / name, shard, args, spec, torch, device, first)
        first += len(shard)
        index.update({t[0]: name for t in shard})
        print(f"make_checkpoint: {name}: {len(shard)} tensors "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    if len(shards) > 1:
        (out / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": total}, "weight_map": index}, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config_of(spec), indent=2, sort_keys=True) + "\n")
    params = sum(math.prod(t[1]) for t in tensors)
    print(json.dumps({"size": args.size, "out": str(out), "parameters": params,
                      "bytes": total, "files": len(shards), "dtype": args.dtype,
                      "device": device, "weights": not args.no_weights,
                      "seconds": round(time.perf_counter() - start, 2)}))


if __name__ == "__main__":
    main()
