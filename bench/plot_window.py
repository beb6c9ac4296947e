#!/usr/bin/env python3
"""Plots mstar-bench-window's samples: the KV pages the request holds (left)
and the process's resident memory (right) against generated tokens, windowed
vs unwindowed.

    python3 bench/plot_window.py WINDOW.jsonl [--out PNG]

Writes PNG (default: the JSONL's name with .png) and prints, per run, the
first and last samples and the largest page count.
"""
import argparse
import json
import pathlib
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {}
    for n, line in enumerate(args.jsonl.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            runs.setdefault(r["run"], []).append(r)
        except (ValueError, KeyError) as e:
            print(f"plot_window: {args.jsonl}:{n}: not a sample ({e})", file=sys.stderr)
            return 2
    if not runs:
        print(f"plot_window: {args.jsonl} holds no samples", file=sys.stderr)
        return 2
    for name, samples in runs.items():
        first, last = samples[0], samples[-1]
        peak = max(s["seq_pages"] for s in samples)
        print(f"{name}: {last['generated']} tokens; pages {first['seq_pages']} -> "
              f"{last['seq_pages']} (most {peak}); resident "
              f"{first['rss_bytes'] / 2**20:.0f} -> {last['rss_bytes'] / 2**20:.0f} MiB; "
              f"{last['generated'] / max(last['seconds'], 1e-9):.0f} tokens/s")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, samples in runs.items():
        x = [s["generated"] for s in samples]
        left.plot(x, [s["seq_pages"] for s in samples], label=name)
        right.plot(x, [s["rss_bytes"] / 2**20 for s in samples], label=name)
    left.set_xlabel("generated tokens")
    left.set_ylabel("KV pages held by the request")
    left.set_title("KV pages")
    right.set_xlabel("generated tokens")
    right.set_ylabel("resident MiB")
    right.set_title("process resident memory")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out = args.out or args.jsonl.with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
