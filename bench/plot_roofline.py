#!/usr/bin/env python3
"""Plots issue 17's roofline fractions over the H200 runs recorded in
bench/results/: the 0.56B Nemotron-H's decode at batch 1 / 64 / 256 (bytes a
step reads over the step time, over the copy bandwidth of the same run) and
prefill of 1 / 8 prompts of 2,048 tokens (FLOPs over the same run's cuBLAS
GEMM rate), and the same for the 8B shape, each against its goal.

    python3 bench/plot_roofline.py [--results DIR] [--out PNG]

Reads the files bench/h200_roofline.sh writes (h200-roofline-nh056-decode-
TAG.jsonl, -prefill-TAG.jsonl, h200-roofline-nh8b-TAG.log), a run a TAG, in
the order of their tags (dates, then the session suffix). A decode point is
the engine's overlap schedule where the run has it and the synchronous one
(hollow marker) where it does not. Prints the table it plots; writes PNG
(default: RESULTS/h200-roofline-history.png).
"""
import argparse
import json
import pathlib
import re
import statistics
import sys

GOALS = {"decode b1": 0.75, "decode b64": 0.6, "decode b256": 0.6, "prefill 1x2048": 0.5,
         "prefill 8x2048": 0.5}
TAG = re.compile(r"h200-roofline-(nh056-decode|nh056-prefill|nh8b)-(\d{8}[a-z0-9]*)\.(jsonl|log)$")


def bench_lines(path: pathlib.Path) -> list[dict]:
    """The JSON lines of a bench's output (other lines, a log's, skipped)."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError as e:
            raise SystemExit(f"plot_roofline: {path}:{n}: not a bench line ({e})")
        # Lines of A/B runs name their variant; only the defaults are plotted.
        if "batch" in r and r.get("walk", "default") == "default":
            out.append(r)
    return out


def series_of(lines: list[dict], schedule_note: bool) -> dict[str, tuple[float, bool]]:
    """{case: (fraction, synchronous)} of one run's lines: the median where
    the run repeated a case."""
    got: dict[str, list[tuple[float, bool]]] = {}
    for r in lines:
        sync = r.get("schedule", "sync") != "overlap" if schedule_note else False
        if r.get("new_tokens", 0) > 2 and "roofline_decode" in r:
            got.setdefault(f"decode b{r['batch']}", []).append(
                (r["roofline_decode"]["bandwidth_fraction"], sync))
        elif r.get("prompt_len") == 2048 and "roofline_prefill" in r:
            got.setdefault(f"prefill {r['batch']}x2048", []).append(
                (r["roofline_prefill"]["compute_fraction"], False))
    return {c: (statistics.median(v[0] for v in vs), vs[0][1]) for c, vs in got.items()}


def collect(results: pathlib.Path) -> dict[str, dict[str, dict[str, tuple[float, bool]]]]:
    """{model: {tag: {case: (fraction, sync)}}}."""
    runs: dict[str, dict[str, dict[str, tuple[float, bool]]]] = {"0.56B": {}, "8B shape": {}}
    for path in sorted(results.iterdir()):
        m = TAG.match(path.name)
        if m is None:
            continue
        kind, tag = m.group(1), m.group(2)
        model = "8B shape" if kind == "nh8b" else "0.56B"
        got = series_of(bench_lines(path), kind != "nh8b")
        runs[model].setdefault(tag, {}).update(got)
    # The overlap run of a tag wins over its -sync twin (sync files are named
    # ...-decode-sync-TAG and do not match TAG above, so nothing to merge).
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = pathlib.Path(__file__).resolve().parent
    ap.add_argument("--results", type=pathlib.Path, default=here / "results")
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    runs = collect(args.results)
    if not any(runs.values()):
        print(f"plot_roofline: {args.results}: no h200-roofline-*-TAG files", file=sys.stderr)
        return 2
    cases = list(GOALS)
    for model, by_tag in runs.items():
        print(f"{model}: run | " + " | ".join(cases))
        for tag in sorted(by_tag):
            row = [f"{by_tag[tag][c][0]:.3f}{'s' if by_tag[tag][c][1] else ''}"
                   if c in by_tag[tag] else "-" for c in cases]
            print(f"  {tag} | " + " | ".join(row))
    try:
        import matplotlib
    except ImportError:
        print("plot_roofline: no matplotlib (pip install matplotlib): table only", file=sys.stderr)
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    colors = dict(zip(cases, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for ax, (model, by_tag) in zip(axes, runs.items()):
        tags = sorted(by_tag)
        for c in cases:
            xs = [i for i, t in enumerate(tags) if c in by_tag[t]]
            if not xs:
                continue
            ys = [by_tag[tags[i]][c][0] for i in xs]
            ax.plot(xs, ys, "-", color=colors[c], label=f"{c} (goal {GOALS[c]})")
            for i, y in zip(xs, ys):
                hollow = by_tag[tags[i]][c][1]
                ax.plot(i, y, "o", color=colors[c], mfc="white" if hollow else colors[c])
            ax.axhline(GOALS[c], color=colors[c], ls=":", lw=1)
        ax.set_xticks(range(len(tags)), tags, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"Nemotron-H {model}, H200 (bf16, CUDA graphs)")
        ax.set_xlabel("run (bench/results tag)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of the roofline (same-run copy / GEMM rate)")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.suptitle("Issue 17: decode (bandwidth) and prefill (tensor-core) fractions over the runs; "
                 "hollow: synchronous schedule", fontsize=10)
    fig.tight_layout()
    out = args.out or args.results / "h200-roofline-history.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
