#!/usr/bin/env python3
"""Plots bench/h200_overlap.sh's results: decode tokens/s (left) and the
device's median idle gap between consecutive decode steps (right) against the
batch size, sync vs overlap schedule, one line per model size.

    python3 bench/plot_overlap.py OVERLAP.jsonl [--out PNG]

Each point is the median over the script's rounds. Writes PNG (default: the
JSONL's name with .png) and prints the table it plots.
"""
import argparse
import json
import pathlib
import statistics
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    runs: dict[tuple[str, str, int], list[dict]] = {}
    for n, line in enumerate(args.jsonl.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            runs.setdefault((r["size"], r["schedule"], int(r["batch"])), []).append(r)
        except (ValueError, KeyError) as e:
            print(f"plot_overlap: {args.jsonl}:{n}: not a bench line ({e})", file=sys.stderr)
            return 2
    if not runs:
        print(f"plot_overlap: {args.jsonl}: no results", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (tps, gap) = plt.subplots(1, 2, figsize=(11, 4.2))
    for size in sorted({k[0] for k in runs}):
        for schedule, style in (("sync", "--"), ("overlap", "-")):
            batches = sorted(k[2] for k in runs if k[0] == size and k[1] == schedule)
            if not batches:
                continue
            med = lambda key: [statistics.median(r[key] for r in runs[(size, schedule, b)])
                               for b in batches]
            label = f"{size} {schedule}"
            tps.plot(batches, med("decode_tokens_per_s"), style, marker="o", label=label)
            gap.plot(batches, med("idle_gap_us_median"), style, marker="o", label=label)
            for b, t, g in zip(batches, med("decode_tokens_per_s"), med("idle_gap_us_median")):
                print(f"{size:>5} {schedule:>7} batch {b:>4}: {t:12,.0f} tok/s, idle gap {g:8.1f} us")
    for ax in (tps, gap):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (decode rows per step)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    tps.set_yscale("log")
    tps.set_ylabel("decode tokens/s")
    gap.set_ylabel("device idle between decode steps, us (median)")
    gap.axhline(10, color="grey", lw=0.8)
    gap.text(1, 11, "goal: 10 us", fontsize=8, color="grey")
    device = next(iter(runs.values()))[0].get("device", "")
    fig.suptitle(f"mstar-bench-model-gpu, sync vs overlap schedule ({device})")
    fig.tight_layout()
    out = args.out or args.jsonl.with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
