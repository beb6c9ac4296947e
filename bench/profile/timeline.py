"""Where a decode step's time goes when its kernels overlap (chained
launches): reads the timeline bench/profile/kernel_times.cpp writes
(MSTAR_KERNEL_TIMELINE), cuts it into steps at each `--step-start` kernel
(default: the embedding lookup, one a step), and charges every moment of a
step to the kernel whose end the device was waiting for: walking the
kernels in start order, kernel i is charged end_i - max(end of those before)
when positive ("exposed"), and a start after every earlier end leaves an
idle gap. Prints, per kernel name, calls a step, mean duration and mean
exposed time a step, the idle time a step before it (gaps the device spent
waiting for that kernel to start), the steps' mean span and idle time, and
the mean gap between one step's last kernel and the next one's first (steps
that followed each other in the timeline; a graph boundary).
  python3 bench/profile/timeline.py TIMELINE.jsonl [--step-start NAME] [--json]
"""

import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--step-start", default="embedding_kernel")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spans = [json.loads(l) for l in open(args.timeline) if l.startswith("{")]
    spans.sort(key=lambda s: s["start_ns"])
    steps, cur = [], None
    for s in spans:
        if s["kernel"].startswith(args.step_start):
            cur = []
            steps.append(cur)
        if cur is not None:
            cur.append(s)
    steps = steps[1:-1]  # the first and last may be cut by the ring's ends
    # Only the steps of the commonest kernel sequence (the decode steps; a
    # prompt's step between them has another).
    sig = collections.Counter(tuple(s["kernel"] for s in st) for st in steps)
    # The gap from a step's last end to the next step's first start (a graph
    # boundary, where no chained launch overlaps), over pairs of such steps
    # that follow each other.
    between = []
    if sig:
        common = sig.most_common(1)[0][0]
        kept = [tuple(s["kernel"] for s in st) == common for st in steps]
        between = [b[0]["start_ns"] - max(s["end_ns"] for s in a)
                   for a, b, ka, kb in zip(steps, steps[1:], kept, kept[1:]) if ka and kb]
        steps = [st for st, k in zip(steps, kept) if k]
    if not steps:
        sys.exit(f"timeline.py: fewer than three '{args.step_start}' kernels in {args.timeline}")
    dur = collections.defaultdict(float)
    exposed = collections.defaultdict(float)
    calls = collections.defaultdict(int)
    idle_before = collections.defaultdict(float)  # gaps, by the kernel that started after each
    span_total = idle_total = 0.0
    for st in steps:
        horizon = st[0]["start_ns"]
        for s in st:
            if s["start_ns"] > horizon:
                idle_total += s["start_ns"] - horizon
                idle_before[s["kernel"]] += s["start_ns"] - horizon
            e = max(0, s["end_ns"] - max(horizon, s["start_ns"]))
            exposed[s["kernel"]] += e
            dur[s["kernel"]] += s["end_ns"] - s["start_ns"]
            calls[s["kernel"]] += 1
            horizon = max(horizon, s["end_ns"])
        span_total += horizon - st[0]["start_ns"]
    n = len(steps)
    rows = sorted(exposed, key=lambda k: -exposed[k])
    if args.json:
        for k in rows:
            print(json.dumps({"kernel": k, "calls_per_step": calls[k] / n,
                              "mean_us": dur[k] / calls[k] / 1e3,
                              "exposed_us_per_step": exposed[k] / n / 1e3,
                              "idle_before_us_per_step": idle_before[k] / n / 1e3}))
        print(json.dumps({"steps": n, "span_us": span_total / n / 1e3,
                          "idle_us": idle_total / n / 1e3,
                          "between_steps_us": sum(between) / len(between) / 1e3 if between else None}))
        return
    gap = f", {sum(between) / len(between) / 1e3:.1f} us between steps" if between else ""
    print(f"{n} steps: span {span_total / n / 1e3:.1f} us a step, idle {idle_total / n / 1e3:.1f} us{gap}")
    print(f"{'exposed us':>10s} {'share':>6s} {'calls':>6s} {'mean us':>8s} {'idle bef':>8s}  kernel")
    for k in rows:
        print(f"{exposed[k] / n / 1e3:10.2f} {100 * exposed[k] / span_total:5.1f}% "
              f"{calls[k] / n:6.1f} {dur[k] / calls[k] / 1e3:8.2f} {idle_before[k] / n / 1e3:8.2f}"
              f"  {k[:110]}")


if __name__ == "__main__":
    main()
