#!/usr/bin/env python3
"""Session 52's decode-attention table: ours (mstar-gpu-bench --suite attention --graphs --json
lines tagged with "setting") against FlashInfer's fastest decode wrapper (bench/baselines_h200.py
--parts flashinfer --modes graph), us a call and FlashInfer's time over ours.
    python3 attn_table.py OURS.jsonl FLASHINFER.jsonl"""
import json, sys, collections
best = {}
try:
    for l in open(sys.argv[2]):
        if l.startswith("{"):
            d = json.loads(l)
            if d.get("library") == "flashinfer" and "decode" in d.get("case", "") and "us_per_call" in d:
                r = int(d["rows"])
                best[r] = min(best.get(r, 1e9), d["us_per_call"])
except OSError:
    pass
ours = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    d = json.loads(l)
    c = d.get("case", "")
    if c.startswith("decode_attention_split_b"):
        ours[d["setting"]][int(d["rows"])] = (d["us_per_call"], d.get("splits"), d.get("merge"), d.get("walk"))
rows = sorted({r for v in ours.values() for r in v})
print("FlashInfer best (graph) us: " + " / ".join(f"{best.get(r, float('nan')):.1f}" for r in rows))
for s, v in ours.items():
    cells = []
    for r in rows:
        if r in v:
            us, sp, mg, wk = v[r]
            fi = best.get(r)
            cells.append(f"{us:.1f} (s{(sp or 0):.0f} m{mg} w{(wk or 0):.0f}{'' if fi is None else f' {fi / us:.3f}'})")
        else:
            cells.append("-")
    print(f"{s:10s} " + " | ".join(cells))
