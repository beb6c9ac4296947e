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
that followed each other in the timeline; a graph boundary). With
`--against OTHER.jsonl` (the same steps under other switches, e.g. a fold
on and off) it prints instead each kernel's exposed time a step in both
and the difference, largest first, and the two spans. With `--launches`
it prints instead the step's kernels one launch at a time in start order
(the decode steps all launch the same sequence): each launch's mean start
and end from the step's start, its exposed time, and how long it started
before the end of every launch before it (its overlap: a chained kernel
resident early), so a slow layer or a launch that could not start early
shows by position.
  python3 bench/profile/timeline.py TIMELINE.jsonl [--step-start NAME]
      [--against OTHER | --launches] [--json]
"""

import argparse
import collections
import json
import sys


def summarize(path, step_start):
    """The timeline at `path` cut into decode steps at each `step_start`
    kernel: per kernel name its calls, summed duration, exposed time and idle
    time before it over those steps, and the steps' count, summed span and
    idle time and the gaps between consecutive steps."""
    spans = [json.loads(l) for l in open(path) if l.startswith("{")]
    spans.sort(key=lambda s: s["start_ns"])
    steps, cur = [], None
    for s in spans:
        if s["kernel"].startswith(step_start):
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
        sys.exit(f"timeline.py: fewer than three '{step_start}' kernels in {path}")
    t = {"dur": collections.defaultdict(float), "exposed": collections.defaultdict(float),
         "calls": collections.defaultdict(int), "idle_before": collections.defaultdict(float),
         "span": 0.0, "idle": 0.0, "steps": len(steps), "between": between,
         # Launch i of the common sequence: its name and summed start, end,
         # exposed time and overlap (start before the horizon), from the step's start.
         "launches": [{"kernel": s["kernel"], "start": 0.0, "end": 0.0, "exposed": 0.0,
                       "overlap": 0.0} for s in steps[0]]}
    for st in steps:
        t0 = horizon = st[0]["start_ns"]
        for i, s in enumerate(st):
            if s["start_ns"] > horizon:
                t["idle"] += s["start_ns"] - horizon
                t["idle_before"][s["kernel"]] += s["start_ns"] - horizon
            e = max(0, s["end_ns"] - max(horizon, s["start_ns"]))
            t["exposed"][s["kernel"]] += e
            t["dur"][s["kernel"]] += s["end_ns"] - s["start_ns"]
            t["calls"][s["kernel"]] += 1
            launch = t["launches"][i]
            launch["start"] += s["start_ns"] - t0
            launch["end"] += s["end_ns"] - t0
            launch["exposed"] += e
            launch["overlap"] += max(0, horizon - s["start_ns"]) if i > 0 else 0
            horizon = max(horizon, s["end_ns"])
        t["span"] += horizon - st[0]["start_ns"]
    return t


def launches(t, as_json):
    """The common step's launches in start order, each averaged over the steps."""
    n = t["steps"]
    rows = [{"launch": i, "kernel": l["kernel"], "start_us": l["start"] / n / 1e3,
             "end_us": l["end"] / n / 1e3, "exposed_us": l["exposed"] / n / 1e3,
             "overlap_us": l["overlap"] / n / 1e3} for i, l in enumerate(t["launches"])]
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"{n} steps, {len(rows)} launches a step, mean times from the step's start")
    print(f"{'#':>3s} {'start us':>9s} {'end us':>9s} {'exposed':>8s} {'overlap':>8s}  kernel")
    for r in rows:
        print(f"{r['launch']:3d} {r['start_us']:9.2f} {r['end_us']:9.2f} {r['exposed_us']:8.2f} "
              f"{r['overlap_us']:8.2f}  {r['kernel'][:100]}")


def per_step_us(t, what, kernel=None):
    v = t[what] if kernel is None else t[what].get(kernel, 0.0)
    return v / t["steps"] / 1e3


def compare(a, b, as_json):
    """Kernel by kernel, what timeline `a` spends a step against `b`."""
    kernels = sorted(set(a["exposed"]) | set(b["exposed"]),
                     key=lambda k: -abs(per_step_us(a, "exposed", k) - per_step_us(b, "exposed", k)))
    rows = [{"kernel": k,
             "calls_per_step": [a["calls"].get(k, 0) / a["steps"], b["calls"].get(k, 0) / b["steps"]],
             "exposed_us_per_step": [per_step_us(a, "exposed", k), per_step_us(b, "exposed", k)],
             "delta_us": per_step_us(a, "exposed", k) - per_step_us(b, "exposed", k)}
            for k in kernels]
    total = {"steps": [a["steps"], b["steps"]],
             "span_us": [per_step_us(a, "span"), per_step_us(b, "span")],
             "kernels_per_step": [sum(a["calls"].values()) / a["steps"],
                                  sum(b["calls"].values()) / b["steps"]],
             "delta_us": per_step_us(a, "span") - per_step_us(b, "span")}
    if as_json:
        for r in rows:
            print(json.dumps(r))
        print(json.dumps(total))
        return
    print(f"span {total['span_us'][0]:.1f} us a step against {total['span_us'][1]:.1f} "
          f"({total['delta_us']:+.1f}); kernels a step {total['kernels_per_step'][0]:.1f} "
          f"against {total['kernels_per_step'][1]:.1f}")
    print(f"{'delta us':>9s} {'exposed':>8s} {'against':>8s} {'calls':>5s} {'against':>7s}  kernel")
    for r in rows:
        print(f"{r['delta_us']:+9.2f} {r['exposed_us_per_step'][0]:8.2f} "
              f"{r['exposed_us_per_step'][1]:8.2f} {r['calls_per_step'][0]:5.1f} "
              f"{r['calls_per_step'][1]:7.1f}  {r['kernel'][:100]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--step-start", default="embedding_kernel")
    ap.add_argument("--against", metavar="TIMELINE",
                    help="a second timeline (the same steps under other switches): print each "
                         "kernel's exposed time a step in both and the difference, largest first")
    ap.add_argument("--launches", action="store_true",
                    help="the step's launches one by one in start order: mean start, end, "
                         "exposed time and overlap with the launches before")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.against and args.launches:
        ap.error("--against and --launches are two different reports: take one")
    t = summarize(args.timeline, args.step_start)
    if args.against:
        compare(t, summarize(args.against, args.step_start), args.json)
        return
    if args.launches:
        launches(t, args.json)
        return
    n = t["steps"]
    exposed, dur, calls, idle_before = t["exposed"], t["dur"], t["calls"], t["idle_before"]
    between = t["between"]
    rows = sorted(exposed, key=lambda k: -exposed[k])
    if args.json:
        for k in rows:
            print(json.dumps({"kernel": k, "calls_per_step": calls[k] / n,
                              "mean_us": dur[k] / calls[k] / 1e3,
                              "exposed_us_per_step": exposed[k] / n / 1e3,
                              "idle_before_us_per_step": idle_before[k] / n / 1e3}))
        print(json.dumps({"steps": n, "span_us": t["span"] / n / 1e3,
                          "idle_us": t["idle"] / n / 1e3,
                          "between_steps_us": sum(between) / len(between) / 1e3 if between else None}))
        return
    gap = f", {sum(between) / len(between) / 1e3:.1f} us between steps" if between else ""
    print(f"{n} steps: span {t['span'] / n / 1e3:.1f} us a step, idle {t['idle'] / n / 1e3:.1f} us{gap}")
    print(f"{'exposed us':>10s} {'share':>6s} {'calls':>6s} {'mean us':>8s} {'idle bef':>8s}  kernel")
    for k in rows:
        print(f"{exposed[k] / n / 1e3:10.2f} {100 * exposed[k] / t['span']:5.1f}% "
              f"{calls[k] / n:6.1f} {dur[k] / calls[k] / 1e3:8.2f} {idle_before[k] / n / 1e3:8.2f}"
              f"  {k[:110]}")


if __name__ == "__main__":
    main()
