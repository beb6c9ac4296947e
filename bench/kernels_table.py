"""Joins mstar-gpu-bench --suite kernels17 --json (ours) with
bench/baselines_h200.py --json (the baselines) by case name into a Markdown
table: per case our time, the fastest baseline that ran (library / backend,
dtype, eager or CUDA-graph replay) and the ratio baseline us / our us (>= 1:
ours at least as fast), and beside it the fastest FlashInfer line alone and
its ratio the same way (FlashInfer us / our us) where the case has one. decode_attention_split_b<rows> joins
decode_attention_b<rows>, prefill_attention_<rows>x<L>_<kernel> (a prefill
kernel forced: mma, wgmma, wgmma_serial, wgmma_lean; wgmma_ws / wgmma_ws_pp in runs before session 38) prefill_attention_<rows>x<L>. Then
every baseline row, the refusals, FlashInfer's build (per module: seconds, ok)
and the notes.

  python3 bench/kernels_table.py OURS.jsonl BASELINES.jsonl [> kernels-table.md]
"""

import json
import re
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def which(b):
    gqa = f", {b['gqa']}" if "gqa" in b else ""
    return f"{b['library']}/{b['backend']} {b['dtype']} {b['mode']}{gqa}"


def rate(r):
    if "TFLOP_per_s" in r and "prefill_attention" in r.get("case", ""):
        return f"{r['TFLOP_per_s']:.1f} TFLOP/s"
    if "GB_per_s" in r:
        return f"{r['GB_per_s']:.0f} GB/s"
    return ""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours, base = read(sys.argv[1]), read(sys.argv[2])
    timed = [b for b in base if "us_per_call" in b]
    by_case = {}
    for b in timed:
        by_case.setdefault(b["case"], []).append(b)
    print("| case | ours us | baseline us (which) | ratio | flashinfer us (which) | ratio |")
    print("| --- | ---: | --- | ---: | --- | ---: |")
    for o in ours:
        if "us_per_call" not in o:
            continue
        case = o["case"]
        joined = re.sub(r"^(prefill_attention_\d+x\d+)_(mma|wgmma|wgmma_serial|wgmma_ws|wgmma_ws_pp|wgmma_lean)$", r"\1", case)
        cands = by_case.get(joined.replace("_split_b", "_b"), [])
        us = o["us_per_call"]
        if not cands:
            print(f"| {case} | {us:.1f} | none ran | | | |")
            continue
        best = min(cands, key=lambda b: b["us_per_call"])
        fi = [b for b in cands if b["library"] == "flashinfer"]
        fbest = min(fi, key=lambda b: b["us_per_call"]) if fi else None
        fcols = (f"{fbest['us_per_call']:.1f} ({which(fbest)}) | {fbest['us_per_call'] / us:.2f}"
                 if fbest else " | ")
        print(f"| {case} | {us:.1f} | {best['us_per_call']:.1f} ({which(best)}) | "
              f"{best['us_per_call'] / us:.2f} | {fcols} |")
    copy_ours = sorted(o["copy_GB_per_s"] for o in ours if "copy_GB_per_s" in o)
    copy_base = sorted(b["copy_GB_per_s"] for b in timed)
    if copy_ours and copy_base:
        print(f"\nd2d copy (median over cases): ours' run {copy_ours[len(copy_ours) // 2]:.0f} "
              f"GB/s, baselines' run {copy_base[len(copy_base) // 2]:.0f} GB/s")
    print("\n| case | ours us | ours rate | baseline | baseline us | rate | ratio |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    ours_by_case = {o["case"]: o for o in ours if "us_per_call" in o}
    for b in timed:
        o = ours_by_case.get(b["case"])
        ous = f"{o['us_per_call']:.1f}" if o else ""
        ratio = f"{b['us_per_call'] / o['us_per_call']:.2f}" if o else ""
        print(f"| {b['case']} | {ous} | {rate(o) if o else ''} | {which(b)} | "
              f"{b['us_per_call']:.1f} | {rate(b)} | {ratio} |")
    built = [b for b in base if "flashinfer_build" in b]
    if built:
        print("\nFlashInfer build:\n")
        for b in built:
            how = "ok" if b["ok"] else f"failed: {b.get('error', '')}"
            print(f"- {b['flashinfer_build']}: {b['seconds']} s, {how}")
    refused = [b for b in base if "refused" in b]
    if refused:
        print("\nRefused:\n")
        for b in refused:
            print(f"- {b['case']} {b['library']}/{b['backend']}: {b['refused']}")
    notes = [b["note"] for b in base if "note" in b]
    if notes:
        print("\nNotes:\n")
        for n in notes:
            print(f"- {n}")


if __name__ == "__main__":
    main()
