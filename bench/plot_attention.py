#!/usr/bin/env python3
"""Plots paged attention on the H200 against PyTorch SDPA and FlashInfer
from the same shapes: decode (microseconds per call against rows, a line per
walk of `mstar-gpu-bench --suite attention --attn-variants`, the fastest
SDPA backend dashed, FlashInfer's fastest dash-dotted) and prefill (a bar
per kernel and prompt count, SDPA's and FlashInfer's best beside them),
each with a panel of the baseline's time over ours (SDPA's per walk or
kernel; FlashInfer's for the run's default decode and, hatched, per kernel).

    python3 bench/plot_attention.py OURS.jsonl BASELINES.jsonl [--out PNG]

OURS: mstar-gpu-bench --json lines (`case`, `rows`, `us_per_call`);
decode cases are decode_attention[_split]_<walk>[_<merge>]_b<rows>, prefill
cases prefill_attention_<n>x<len>[_<kernel>]. BASELINES:
bench/baselines_h200.py lines (`library`, `backend`, `mode`, `dtype`):
torch_sdpa and flashinfer, each on its own. Only bf16 baselines count; per
case and library the fastest of them is taken. Prints each series' times
and ratios.
"""
import argparse
import pathlib
import re
import sys

from plot_variants import read as lines  # JSON lines of a bench or baseline run

DECODE = re.compile(r"^decode_attention_(?P<variant>.*?)_?b(?P<rows>\d+)$")
PREFILL = re.compile(r"^prefill_attention_(?P<shape>\d+x\d+)(?:_(?P<kernel>.+))?$")


def best_baselines(rows: list[dict], library: str) -> dict[str, tuple[float, str]]:
    best: dict[str, tuple[float, str]] = {}
    for r in rows:
        if r.get("dtype") != "bfloat16" or "us_per_call" not in r or r.get("library") != library:
            continue
        label = f"{r.get('library')} {r.get('backend')} ({r.get('mode')})"
        case = r["case"]
        if case not in best or r["us_per_call"] < best[case][0]:
            best[case] = (r["us_per_call"], label)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ours", type=pathlib.Path)
    ap.add_argument("baselines", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    a = ap.parse_args()
    ours = lines(a.ours)
    base_lines = lines(a.baselines)
    base = best_baselines(base_lines, "torch_sdpa")
    fib = best_baselines(base_lines, "flashinfer")
    if not ours:
        sys.exit(f"{a.ours}: no results")

    decode: dict[str, dict[int, float]] = {}
    prefill: dict[str, dict[str, float]] = {}
    for r in ours:
        case = r["case"]
        if m := DECODE.match(case):
            variant = m["variant"].rstrip("_") or "default one pass"
            decode.setdefault(variant, {})[int(m["rows"])] = r["us_per_call"]
        elif m := PREFILL.match(case):
            prefill.setdefault(m["kernel"] or "default", {})[m["shape"]] = r["us_per_call"]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(13, 8), height_ratios=[3, 1.4])
    # Decode: a line per walk, its split form with the block merge where the
    # run has one (what a step of few rows runs), else its one-pass form
    # (many rows do not split), and the run's default ("split").
    shown: dict[str, dict[int, float]] = {}
    for walk in ("regs", "cp4", "cp2", "mma", "rows", "rows_mma"):
        series = dict(decode.get(walk, {}))
        series.update(decode.get(f"split_{walk}_mblock", {}))
        if series:
            shown[walk] = series
    if "split" in decode:
        shown["split"] = decode["split"]
    rows_all = sorted({r for s in decode.values() for r in s})
    sdpa = {r: base[f"decode_attention_b{r}"] for r in rows_all if f"decode_attention_b{r}" in base}
    fdec = {r: fib[f"decode_attention_b{r}"] for r in rows_all if f"decode_attention_b{r}" in fib}
    print("decode, us a call (SDPA's time / ours" + (", FlashInfer's / ours" if fdec else "") + "):")
    for v, s in sorted(shown.items()):
        xs = sorted(s)
        thick = v == "split"
        ax[0][0].plot(xs, [s[x] for x in xs], marker="o", lw=3 if thick else 1.2,
                      label="the run's default" if thick else v)
        ratios = [(x, sdpa[x][0] / s[x]) for x in xs if x in sdpa]
        ax[1][0].plot([x for x, _ in ratios], [q for _, q in ratios], marker="o", lw=3 if thick else 1.2)
        if thick and fdec:
            fr = [(x, fdec[x][0] / s[x]) for x in xs if x in fdec]
            ax[1][0].plot([x for x, _ in fr], [q for _, q in fr], "k-.", marker="s", lw=2,
                          label="FlashInfer / the run's default")
        print(f"  {v:32s}", "  ".join(
            f"b{x} {s[x]:8.2f}" + (f" ({sdpa[x][0] / s[x]:.2f}" if x in sdpa else " (-")
            + (f", {fdec[x][0] / s[x]:.2f})" if x in fdec else ")") for x in xs))
    if sdpa:
        xs = sorted(sdpa)
        ax[0][0].plot(xs, [sdpa[x][0] for x in xs], "k--", lw=2, label=f"SDPA best: {sdpa[xs[-1]][1]}")
    if fdec:
        xs = sorted(fdec)
        ax[0][0].plot(xs, [fdec[x][0] for x in xs], "k-.", lw=2,
                      label=f"FlashInfer best: {fdec[xs[-1]][1]}")
        for x in xs:
            print(f"  flashinfer b{x}: {fdec[x][0]:8.2f} us ({fdec[x][1]})")
    ax[0][0].set(xscale="log", yscale="log", xlabel="rows", ylabel="us a call",
                 title="decode attention, 2,048 positions, 32 q / 8 kv heads, D 128, bf16")
    ax[0][0].legend(fontsize=7)
    ax[1][0].axhline(1.0, color="k", ls="--", lw=1)
    ax[1][0].set(xscale="log", xlabel="rows", ylabel="baseline / ours")
    if fdec:
        ax[1][0].legend(fontsize=7)

    shapes = sorted({s for k in prefill.values() for s in k}, key=lambda s: int(s.split("x")[0]))
    kernels = sorted(prefill)
    width = 0.8 / (len(kernels) + 2)
    print("prefill, us a call (SDPA's time / ours, FlashInfer's / ours):")

    def over(best: dict, k: str) -> list[float]:
        return [best[f"prefill_attention_{s}"][0] / prefill[k][s] if f"prefill_attention_{s}" in best
                and s in prefill[k] else 0.0 for s in shapes]

    for i, k in enumerate(kernels):
        ys = [prefill[k].get(s, 0.0) for s in shapes]
        ax[0][1].bar([j + i * width for j in range(len(shapes))], ys, width, label=k, color=f"C{i}")
        ratios, fratios = over(base, k), over(fib, k)
        ax[1][1].bar([j + i * width for j in range(len(shapes))], ratios, width / 2, color=f"C{i}")
        if fib:
            ax[1][1].bar([j + i * width + width / 2 for j in range(len(shapes))], fratios, width / 2,
                         hatch="//", fill=False, edgecolor=f"C{i}")
        print(f"  {k:16s}", "  ".join(f"{s} {prefill[k][s]:9.2f} ({q:.2f}, {fq:.2f})"
                                      for s, q, fq in zip(shapes, ratios, fratios) if s in prefill[k]))
    sd = [base.get(f"prefill_attention_{s}", (0.0, ""))[0] for s in shapes]
    ax[0][1].bar([j + len(kernels) * width for j in range(len(shapes))], sd, width, color="k",
                 label="SDPA best")
    fd = [fib.get(f"prefill_attention_{s}", (0.0, ""))[0] for s in shapes]
    if fib:
        ax[0][1].bar([j + (len(kernels) + 1) * width for j in range(len(shapes))], fd, width,
                     color="0.5", label="FlashInfer best")
        for s in shapes:
            if f"prefill_attention_{s}" in fib:
                print(f"  flashinfer {s}: {fib[f'prefill_attention_{s}'][0]:9.2f} us "
                      f"({fib[f'prefill_attention_{s}'][1]})")
    ax[0][1].set_xticks([j + 0.4 for j in range(len(shapes))], shapes)
    ax[0][1].set(ylabel="us a call", title="prefill attention, causal, 2,048 tokens a row")
    ax[0][1].legend(fontsize=7)
    ax[1][1].axhline(1.0, color="k", ls="--", lw=1)
    ax[1][1].set_xticks([j + 0.4 for j in range(len(shapes))], shapes)
    ax[1][1].set(ylabel="SDPA / ours (hatched: FlashInfer / ours)")
    fig.tight_layout()
    out = a.out or a.ours.with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
