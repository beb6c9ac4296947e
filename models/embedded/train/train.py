#!/usr/bin/env python3
"""Trains the embedded default model: a small Nemotron-H on ten public-domain novels.

Three steps (README.md beside this file has the exact commands):

    train.py prepare --root / --out DATA     # CPU: corpus, BPE tokenizer, token ids
    train.py fit --data DATA --out MODEL     # GPU: the model (transformers' NemotronH)
    train.py sample --model MODEL            # CPU: greedy continuations with transformers

`prepare` reads the novels from the installed Debian packages (corpus.py says which), trains a
GPT-2 style byte-level BPE with `tokenizers` and writes the train / validation token ids.
`fit` trains transformers' NemotronHForCausalLM (its pure-PyTorch Mamba-2 path) on random
windows of the training ids, keeps the weights of the best validation loss and writes a
Hugging Face folder that mstar-cpp loads: config.json, model.safetensors (bf16), tokenizer.json,
tokenizer_config.json. Seeds are fixed; the GPU run is deterministic up to the order of
floating-point reductions in its kernels.
"""

import argparse
import json
import math
import pathlib
import shutil
import sys
import time

import numpy as np

EOS = "<|endoftext|>"
VOCAB_SIZE = 4096
HOLDOUT = 0.02  # the last 2% of each book's paragraphs is the validation set
SEED = 1234

# hybrid_override_pattern: M = Mamba-2, * = attention, - = MLP.
MODEL = dict(hidden_size=320, pattern="M-M*M-M-", num_attention_heads=4, num_key_value_heads=2,
             head_dim=64, mamba_num_heads=10, mamba_head_dim=64, ssm_state_size=64, n_groups=2,
             conv_kernel=4, chunk_size=64, intermediate_size=1280)

# A text-continuation model: the conversation becomes plain paragraphs and the model continues
# the last one. Kept to the simplest Jinja (for, if, loop.first, item lookup).
CHAT_TEMPLATE = ("{%- for message in messages -%}"
                 "{%- if not loop.first %}{{ '\\n\\n' }}{% endif -%}"
                 "{{- message['content'] -}}"
                 "{%- endfor -%}")


def prepare(args):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    import corpus
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    books = corpus.books(args.root)
    train_texts, val_texts = [], []
    for _title, paras in books:
        cut = len(paras) - max(1, round(HOLDOUT * len(paras)))
        train_texts.append("\n\n".join(paras[:cut]))
        val_texts.append("\n\n".join(paras[cut:]))

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator((p for _t, paras in books for p in paras[:-max(
        1, round(HOLDOUT * len(paras)))]), trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    eos = tok.token_to_id(EOS)
    assert eos == 0 and tok.get_vocab_size() == VOCAB_SIZE, (eos, tok.get_vocab_size())
    write_tokenizer_config(out)

    def ids(texts):
        stream = []
        for text in texts:
            stream += tok.encode(text, add_special_tokens=False).ids + [eos]
        return np.array(stream, dtype=np.uint16)

    train, val = ids(train_texts), ids(val_texts)
    train.tofile(out / "train.bin")
    val.tofile(out / "val.bin")
    chars = sum(len(t) for t in train_texts)
    meta = {"books": [t for t, _p in books], "train_tokens": len(train), "val_tokens": len(val),
            "train_characters": chars, "characters_per_token": chars / len(train),
            "vocab_size": VOCAB_SIZE}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta))


def write_tokenizer_config(folder):
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS, "eos_token": EOS,
              "pad_token": EOS, "unk_token": EOS, "add_bos_token": False, "add_eos_token": False,
              "clean_up_tokenization_spaces": False, "model_max_length": 4096,
              "chat_template": CHAT_TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def make_config(vocab_size):
    from transformers import NemotronHConfig
    names = {"M": "mamba", "*": "attention", "-": "mlp"}
    m = MODEL
    return NemotronHConfig(
        vocab_size=vocab_size, hidden_size=m["hidden_size"],
        layers_block_type=[names[c] for c in m["pattern"]],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_key_value_heads"], head_dim=m["head_dim"],
        intermediate_size=m["intermediate_size"], mlp_hidden_act="relu2",
        mamba_num_heads=m["mamba_num_heads"], mamba_head_dim=m["mamba_head_dim"],
        ssm_state_size=m["ssm_state_size"], n_groups=m["n_groups"],
        conv_kernel=m["conv_kernel"], chunk_size=m["chunk_size"], layer_norm_epsilon=1e-5,
        tie_word_embeddings=False, use_bias=False, mlp_bias=False, use_conv_bias=True,
        max_position_embeddings=4096, pad_token_id=0, bos_token_id=0, eos_token_id=0)


def unclamp_dt(model):
    """transformers clamps dt at time_step_min in its chunked (prefill) scan but not in its
    one-token update; mstar-cpp clamps at time_step_limit (0, inf) in both. Training and the
    saved config (time_step_min 0) use no clamp, so every path computes the same function."""
    for layer in model.model.layers:
        if hasattr(layer.mixer, "time_step_limit"):
            layer.mixer.time_step_limit = (0.0, float("inf"))


def add_residual_dropout(model, p):
    """Dropout on every mixer's output before the residual add, in training only: the data
    (1.9 M tokens) is seen many times. Hooks, so the saved model is plain NemotronH."""
    import torch.nn.functional as F

    def hook(module, _inputs, output):
        if not module.training or p == 0:
            return output
        if isinstance(output, tuple):  # attention: (output, weights)
            return (F.dropout(output[0], p, True),) + output[1:]
        return F.dropout(output, p, True)
    for layer in model.model.layers:
        layer.mixer.register_forward_hook(hook)


def fit(args):
    import torch
    from transformers import NemotronHForCausalLM

    data = pathlib.Path(args.data)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_file = open(out / "train_log.txt", "w")

    def log(msg):
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train = torch.from_numpy(np.fromfile(data / "train.bin", dtype=np.uint16).astype(np.int64))
    val = torch.from_numpy(np.fromfile(data / "val.bin", dtype=np.uint16).astype(np.int64))
    train, val = train.to(device), val.to(device)
    config = make_config(VOCAB_SIZE)
    if args.tiny:  # a CPU check of the whole script
        config.hidden_size, config.intermediate_size = 64, 128
    model = NemotronHForCausalLM(config).to(device)
    unclamp_dt(model)
    add_residual_dropout(model, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"device {device}, {n_params} parameters, train {len(train)} / val {len(val)} tokens, "
        f"{args.steps} steps of {args.batch} x {args.seq} tokens, lr {args.lr}, "
        f"dropout {args.dropout}")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=device == "cuda")
    gen = torch.Generator(device=device).manual_seed(SEED)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        progress = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    def batch(stream, size, g):
        starts = torch.randint(0, len(stream) - args.seq - 1, (size,), device=device, generator=g)
        idx = starts[:, None] + torch.arange(args.seq + 1, device=device)[None, :]
        rows = stream[idx]
        return rows[:, :-1], rows[:, 1:]

    def loss_of(x, y):
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(input_ids=x, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1))

    @torch.no_grad()
    def evaluate():
        model.eval()
        g = torch.Generator(device=device).manual_seed(SEED + 1)  # the same windows every time
        losses = [loss_of(*batch(val, args.batch, g)).item() for _ in range(args.eval_batches)]
        model.train()
        return sum(losses) / len(losses)

    best = (float("inf"), -1, None)
    t0 = time.time()
    tokens = 0
    model.train()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        x, y = batch(train, args.batch, gen)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += x.numel()
        last = step == args.steps - 1
        if step % args.log_every == 0 or last:
            elapsed = time.time() - t0
            msg = (f"step {step} loss {loss.item():.4f} lr {lr_at(step):.2e} "
                   f"{tokens / elapsed:.0f} tok/s {elapsed:.0f}s epochs {tokens / len(train):.2f}")
            if step % args.eval_every == 0 or last:
                v = evaluate()
                if v < best[0]:
                    best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
                msg += f" val {v:.4f} (best {best[0]:.4f} at {best[1]})"
            log(msg)
        if args.max_seconds and time.time() - t0 > args.max_seconds:
            log(f"stopping at step {step}: --max-seconds {args.max_seconds} reached")
            v = evaluate()
            if v < best[0]:
                best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
            break
    elapsed = time.time() - t0
    model.load_state_dict(best[2])
    log(f"trained {elapsed:.1f}s, {tokens} tokens; kept step {best[1]}, val loss {best[0]:.4f}")
    save(model, data, out)
    summary = {"parameters": n_params, "train_seconds": round(elapsed, 1), "tokens": tokens,
               "best_step": best[1], "best_val_loss": round(best[0], 4),
               "final_train_loss": round(loss.item(), 4), "steps": args.steps,
               "batch": args.batch, "seq": args.seq, "lr": args.lr, "dropout": args.dropout,
               "torch": torch.__version__, "device": torch.cuda.get_device_name()
               if device == "cuda" else "cpu"}
    (out / "train_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    log(json.dumps(summary))


def save(model, data, out):
    """bf16 weights, config.json as a published checkpoint spells it, tokenizer files."""
    import torch
    model = model.to("cpu", torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    path = out / "config.json"
    cfg = json.loads(path.read_text())
    types = cfg.pop("layers_block_type")
    cfg["hybrid_override_pattern"] = "".join({"mamba": "M", "attention": "*", "mlp": "-"}.get(
        t, {"linear_attention": "M", "full_attention": "*"}.get(t, "?")) for t in types)
    cfg["num_hidden_layers"] = len(types)
    cfg["time_step_min"] = 0.0  # see unclamp_dt
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(data / f, out / f)


def sample(args):
    import torch
    from transformers import AutoTokenizer, NemotronHForCausalLM
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = NemotronHForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    for prompt in args.prompt or ["Once upon a time"]:
        ids = tok(prompt, return_tensors="pt").input_ids
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=args.max_tokens, do_sample=False)
        new = out[0, ids.shape[1]:].tolist()
        print(json.dumps({"prompt": prompt, "generated_ids": new,
                          "text": tok.decode(new)}, ensure_ascii=False))


def main():
    here = pathlib.Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="corpus, tokenizer and token ids (CPU)")
    p.add_argument("--root", default="/", help="where the Debian packages' files are")
    p.add_argument("--out", required=True)
    p = sub.add_parser("fit", help="train the model (GPU)")
    p.add_argument("--data", required=True, help="the folder prepare wrote")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.2, help="on each mixer's output")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--max-seconds", type=float, default=0, help="stop early after this long")
    p.add_argument("--tiny", action="store_true", help="a tiny model, to check the script")
    p = sub.add_parser("sample", help="greedy continuations with transformers (CPU)")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", action="append")
    p.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    {"prepare": prepare, "fit": fit, "sample": sample}[args.cmd](args)


if __name__ == "__main__":
    main()
