#!/usr/bin/env python3
"""The end-to-end decode table: mstar against transformers on the same checkpoint and GPU.

    python3 bench/e2e_table.py OURS.jsonl THEIRS.jsonl [THEIRS.jsonl ...] [--out FILE.md]

OURS.jsonl: mstar-bench-model-gpu --json lines; each THEIRS.jsonl: bench/transformers_decode.py
decode --json lines (one file a kernel path of transformers: its fast Mamba-2 path, its torch
fallback). Prints (and with --out writes) a markdown table, a row a batch size: decode tokens/s
of each side and ours over each of theirs, then a line a transformers run naming the kernels it
resolved, function by function. A batch missing on one side reads "-".
"""

import argparse
import json
import pathlib
import sys


def rows_by_batch(path):
    """{batch: the JSON line} of a --json output file; non-JSON lines (logs) skipped."""
    found = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if "batch" in row and "decode_tokens_per_s" in row:
                found[row["batch"]] = row
    if not found:
        sys.exit(f"e2e_table: {path} holds no decode lines")
    return found


def rate(value):
    return f"{value:,.0f}" if value else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ours", help="mstar-bench-model-gpu --json output")
    ap.add_argument("theirs", nargs="+", help="transformers_decode.py decode --json outputs")
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args()
    ours = rows_by_batch(args.ours)
    theirs = [rows_by_batch(t) for t in args.theirs]
    paths = [next(iter(t.values())).get("mamba_path", "?") for t in theirs]
    head = ["batch", "mstar decode tok/s"]
    for path in paths:
        head += [f"transformers ({path}) tok/s", "mstar / it"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for batch in sorted(set(ours).union(*theirs)):
        our_rate = ours.get(batch, {}).get("decode_tokens_per_s")
        cells = [str(batch), rate(our_rate)]
        for t in theirs:
            other = t.get(batch, {}).get("decode_tokens_per_s")
            cells += [rate(other), f"{our_rate / other:.1f}x" if our_rate and other else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for t in theirs:
        r = next(iter(t.values()))
        kernels = ", ".join(f"{k}: {v}" for k, v in sorted((r.get("kernels") or {}).items()))
        lines.append(f"- transformers {r.get('transformers')} (torch {r.get('torch')}) on "
                     f"{r.get('gpu')}, {r.get('dtype')}: {r.get('mamba_path')}"
                     + (f" ({kernels})" if kernels else ""))
    mine = next(iter(ours.values()))
    lines.append(f"- mstar on {mine.get('device')}, {mine.get('dtype')}, CUDA graphs "
                 f"{mine.get('cuda_graphs')}; prompt {mine.get('prompt_len')}, "
                 f"{mine.get('new_tokens')} new tokens, median of {mine.get('repeats')}")
    text = "\n".join(lines) + "\n"
    if args.out:
        pathlib.Path(args.out).write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
