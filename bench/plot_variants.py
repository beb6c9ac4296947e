#!/usr/bin/env python3
"""Plots a launch-shape sweep of mstar-gpu-bench (--ssd-update-all-variants,
--delta-decode-all-variants) against a library's times from the same device
call: microseconds per call against rows, one panel per case family (the
case name without its `_b<rows>` tail), a line per table entry, the
default (-1) drawn thick and the library dashed; with a baseline, a row
below of the library's time over ours.

    python3 bench/plot_variants.py SWEEP.jsonl [--baseline LIB.jsonl]
        [--field update_variant] [--only 0 5 8] [--out PNG]

SWEEP lines need `case`, `rows`, `us_per_call` and FIELD (the entry; the
bench writes `update_variant` or `decode_variant`); baseline lines
(bench/baselines_h200.py, bench/fla_delta_rule.py) need `case` or `name`
ending in `_b<rows>` and `us_per_call`, and are labelled by their library,
backend / mode and dtype. Writes PNG (default: SWEEP with .png) and prints
each entry's time at the largest row count.
"""
import argparse
import json
import pathlib
import re
import sys

ROWS = re.compile(r"^(?P<family>.+)_b(?P<rows>\d+)$")


def read(path: pathlib.Path) -> list[dict]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("{"):
            continue
        try:
            out.append(json.loads(line))
        except ValueError as e:
            print(f"plot_variants: {path}:{n}: not JSON ({e})", file=sys.stderr)
    return out


def family_rows(r: dict) -> tuple[str, int] | None:
    m = ROWS.match(str(r.get("case") or r.get("name") or ""))
    return (m["family"], int(m["rows"])) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=pathlib.Path)
    ap.add_argument("--baseline", type=pathlib.Path, action="append", default=[])
    ap.add_argument("--field", default="update_variant",
                    help="the entry's field in SWEEP (update_variant, decode_variant)")
    ap.add_argument("--only", type=int, nargs="+", help="entries to draw (default: all)")
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()

    # family -> entry -> rows -> us
    ours: dict[str, dict[int, dict[int, float]]] = {}
    for r in read(args.sweep):
        fr = family_rows(r)
        if fr is None or args.field not in r or "us_per_call" not in r:
            continue
        entry = int(r[args.field])
        if args.only and entry != -1 and entry not in args.only:
            continue
        ours.setdefault(fr[0], {}).setdefault(entry, {})[fr[1]] = float(r["us_per_call"])
    if not ours:
        print(f"plot_variants: {args.sweep}: no line has case, {args.field} and us_per_call",
              file=sys.stderr)
        return 1
    theirs: dict[str, dict[str, dict[int, float]]] = {}
    for path in args.baseline:
        for r in read(path):
            fr = family_rows(r)
            if fr is None or "us_per_call" not in r:
                continue
            label = " ".join(str(r[k]) for k in ("library", "bench", "backend", "mode", "dtype")
                             if k in r)
            theirs.setdefault(fr[0], {}).setdefault(label, {})[fr[1]] = float(r["us_per_call"])

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted(ours)
    with_ratio = bool(theirs)
    fig, axes = plt.subplots(2 if with_ratio else 1, len(families),
                             figsize=(6.5 * len(families), 9 if with_ratio else 5), squeeze=False)
    for col, fam in enumerate(families):
        ax = axes[0][col]
        for entry, pts in sorted(ours[fam].items()):
            rows = sorted(pts)
            ax.plot(rows, [pts[b] for b in rows], marker="o", markersize=3,
                    linewidth=2.8 if entry == -1 else 1.0,
                    label="the default when measured" if entry == -1 else f"entry {entry}")
        for label, pts in sorted(theirs.get(fam, {}).items()):
            rows = sorted(pts)
            ax.plot(rows, [pts[b] for b in rows], linestyle="--", color="black",
                    alpha=0.5 if "bfloat16" in label else 0.9, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("rows (decode batch)")
        ax.set_ylabel("us per call (CUDA graph)")
        ax.set_title(fam)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        # Below: the library's time over ours (> 1: ours faster), against its
        # float32 line where it has one (else its first).
        refs = theirs.get(fam, {})
        if with_ratio and refs:
            ref_label = next((lab for lab in sorted(refs) if "float32" in lab), sorted(refs)[0])
            ref = refs[ref_label]
            rx = axes[1][col]
            for entry, pts in sorted(ours[fam].items()):
                rows = [b for b in sorted(pts) if b in ref]
                rx.plot(rows, [ref[b] / pts[b] for b in rows], marker="o", markersize=3,
                        linewidth=2.8 if entry == -1 else 1.0,
                        label="the default when measured" if entry == -1 else f"entry {entry}")
            rx.axhline(1.0, color="black", linestyle="--", linewidth=1)
            rx.set_xscale("log", base=2)
            rx.set_xlabel("rows (decode batch)")
            rx.set_ylabel("their time / ours (> 1: ours faster)")
            rx.set_title(f"against {ref_label}", fontsize=9)
            rx.grid(True, which="both", alpha=0.3)
            rx.legend(fontsize=7, loc="upper right")
        top = max(b for pts in ours[fam].values() for b in pts)
        print(f"{fam} at {top} rows: " + ", ".join(
            f"{'default' if e == -1 else e} {pts[top]:.2f}" for e, pts in sorted(ours[fam].items())
            if top in pts) + "".join(
            f"; {lab} {pts[top]:.2f}" for lab, pts in sorted(theirs.get(fam, {}).items())
            if top in pts))
    fig.tight_layout()
    out = args.out or args.sweep.with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
