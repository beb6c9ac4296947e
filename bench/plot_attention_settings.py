#!/usr/bin/env python3
"""Plots decode attention under A/B settings of a device call against
FlashInfer from the same call: microseconds a call against rows (log-log), a
line a setting, FlashInfer's fastest decode wrapper dashed, and a panel of
FlashInfer's time over each setting's.

    python3 bench/plot_attention_settings.py CALL_DIR... [--settings defaults cp,bulk0-]
        [--labels "by grid" "before"] [--out PNG]

Each CALL_DIR holds `attn.jsonl` (bench/device_calls.sh's attn_setting lines:
mstar-gpu-bench --suite attention --json, each tagged "setting": TAG plus
the round's number) and `fi.jsonl` (bench/baselines_h200.py's FlashInfer
lines). A setting is a tag without its round's number, or several joined by
commas (the same setting under other tags in other calls). A setting's time at a row count is the fastest over its rounds and
calls of the launch the rule takes (the split case, `decode_attention_split_b
ROWS`, which runs the rule's chunks, one pass where it splits into one);
settings whose tag starts with ctxN- (other contexts) are left out.
FlashInfer's is its fastest bf16 decode line of that row count. Prints the
table it plots.
"""
import argparse
import json
import pathlib
import re
import sys

SPLIT = re.compile(r"^decode_attention_split_b(?P<rows>\d+)$")
FI = re.compile(r"^decode_attention_b(?P<rows>\d+)$")


def jsonl(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.startswith("{")]


def collect(dirs: list[pathlib.Path], settings: list[str]):
    ours: dict[str, dict[int, float]] = {s: {} for s in settings}
    fi: dict[int, float] = {}
    for d in dirs:
        for r in jsonl(d / "attn.jsonl"):
            m = SPLIT.match(r.get("case", ""))
            tag = r.get("setting", "")
            if not m or tag.startswith("ctx"):
                continue
            base = tag.rstrip("0123456789")
            for setting in settings:
                if base in setting.split(","):
                    rows = int(m["rows"])
                    t = ours[setting]
                    t[rows] = min(t.get(rows, float("inf")), r["us_per_call"])
        for r in jsonl(d / "fi.jsonl"):
            m = FI.match(r.get("case", ""))
            if m and r.get("library") == "flashinfer" and r.get("dtype") == "bfloat16" and "us_per_call" in r:
                rows = int(m["rows"])
                fi[rows] = min(fi.get(rows, float("inf")), r["us_per_call"])
    return ours, fi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=pathlib.Path)
    ap.add_argument("--settings", nargs="+", default=["defaults", "bulk0-"])
    ap.add_argument("--labels", nargs="+", default=None)
    ap.add_argument("--title", default="decode attention, 2,048 positions, 32 q / 8 kv heads, D 128")
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("attention-settings.png"))
    a = ap.parse_args()
    labels = a.labels or a.settings
    if len(labels) != len(a.settings):
        print("plot_attention_settings: --labels needs one label a setting", file=sys.stderr)
        return 2
    ours, fi = collect(a.dirs, a.settings)
    if not any(ours.values()):
        print(f"plot_attention_settings: no lines of {a.settings} in {[str(d) for d in a.dirs]}",
              file=sys.stderr)
        return 1
    rows = sorted(set().union(*[set(v) for v in ours.values()]))
    print("rows  " + "  ".join(f"{l:>18}" for l in labels) + "  flashinfer")
    for n in rows:
        cells = []
        for s in a.settings:
            t = ours[s].get(n)
            cells.append(f"{t:8.1f} ({fi[n] / t:4.2f})" if t and n in fi else
                         (f"{t:8.1f}       " if t else f"{'-':>15}"))
        print(f"{n:<5} " + "  ".join(f"{c:>18}" for c in cells) + f"  {fi.get(n, float('nan')):9.1f}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    for s, label in zip(a.settings, labels):
        xs = sorted(ours[s])
        top.plot(xs, [ours[s][x] for x in xs], marker="o", label=f"mstar {label}")
        both = [x for x in xs if x in fi]
        bottom.plot(both, [fi[x] / ours[s][x] for x in both], marker="o", label=label)
    xs = sorted(fi)
    top.plot(xs, [fi[x] for x in xs], "k--", marker="s", label="FlashInfer 0.2.5 (same call)")
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("us a call")
    top.set_title(a.title, fontsize=10)
    top.legend(fontsize=8)
    top.grid(True, which="both", alpha=0.3)
    bottom.axhline(1.0, color="k", lw=0.8)
    bottom.set_ylabel("FlashInfer / ours")
    bottom.set_xlabel("decode rows")
    bottom.grid(True, alpha=0.3)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
