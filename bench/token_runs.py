#!/usr/bin/env python3
"""Compares the tokens of bench runs (mstar-bench-model-gpu --tokens-out files).

Every file holds one JSON line a full-length run (batch, run, digest, tokens). Per batch
size this prints how many runs drew each digest, and for each run that differs from the
most common one, the first (request, step) where it does and the tokens on both sides
from there. A run that is the same binary, checkpoint and settings as another should
draw the same tokens; this finds where it did not.

    python3 bench/token_runs.py OUT/defaults-*.tokens.jsonl
    python3 bench/token_runs.py --json a.jsonl b.jsonl   # one JSON object instead

Exit status 0 when every run of a batch size drew the same tokens, 1 when some differ,
2 for unreadable input.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys


def fail(message: str) -> None:
    """Unreadable input: the message on stderr, exit status 2."""
    print(f"token_runs: {message}", file=sys.stderr)
    sys.exit(2)


def read_runs(paths: list[str]) -> list[dict]:
    """Every run of every file, each with its file and line number added."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        run = json.loads(line)
                    except json.JSONDecodeError as e:
                        fail(f"{path}:{n}: not JSON ({e})")
                    for key in ("batch", "run", "tokens"):
                        if key not in run:
                            fail(f"{path}:{n}: no '{key}'")
                    run["file"], run["line"] = path, n
                    runs.append(run)
        except OSError as e:
            fail(f"{path}: {e.strerror}")
    return runs


def first_difference(a: list[list[int]], b: list[list[int]]) -> tuple[int, int] | None:
    """(request, step) of the first token where b differs from a; None when equal."""
    if len(a) != len(b):
        return (min(len(a), len(b)), 0)
    for r, (x, y) in enumerate(zip(a, b)):
        for s in range(max(len(x), len(y))):
            if s >= len(x) or s >= len(y) or x[s] != y[s]:
                return (r, s)
    return None


def compare(runs: list[dict]) -> dict:
    """Per batch size: the digests' counts and each differing run's first difference."""
    by_batch: dict[int, list[dict]] = collections.defaultdict(list)
    for run in runs:
        by_batch[run["batch"]].append(run)
    report = {}
    for batch, group in sorted(by_batch.items()):
        key = lambda run: json.dumps(run["tokens"])  # noqa: E731
        counts = collections.Counter(key(run) for run in group)
        usual_key, _ = counts.most_common(1)[0]
        usual = json.loads(usual_key)
        differing = []
        for run in group:
            where = first_difference(usual, run["tokens"])
            if where is None:
                continue
            r, s = where
            mine = run["tokens"][r] if r < len(run["tokens"]) else []
            theirs = usual[r] if r < len(usual) else []
            differing.append({
                "file": run["file"], "line": run["line"], "run": run["run"],
                "digest": run.get("digest"), "request": r, "step": s,
                "requests_differing": sum(
                    1 for x, y in zip(usual, run["tokens"]) if x != y),
                "usual_from_step": theirs[s:s + 8], "this_from_step": mine[s:s + 8],
            })
        report[batch] = {
            "runs": len(group),
            "digests": collections.Counter(run.get("digest", "?") for run in group),
            "differing": differing,
        }
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="--tokens-out files of mstar-bench-model-gpu")
    ap.add_argument("--json", action="store_true", help="one JSON object, not text")
    args = ap.parse_args()
    report = compare(read_runs(args.files))
    if args.json:
        print(json.dumps(report))
    else:
        for batch, r in report.items():
            digests = ", ".join(f"{d} x{n}" for d, n in r["digests"].most_common())
            print(f"batch {batch}: {r['runs']} runs; digests {digests}")
            for d in r["differing"]:
                print(f"  {d['file']}:{d['line']} (run {d['run']}): request {d['request']} "
                      f"first differs at step {d['step']} ({d['requests_differing']} requests "
                      f"differ): usual {d['usual_from_step']} this {d['this_from_step']}")
    return 1 if any(r["differing"] for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
