"""bench/profile/timeline.py on a timeline built here: decode steps (the
commonest kernel sequence) around a prompt's step, with
overlapping (chained) kernels and idle gaps whose charges are known, and a
ring that cut the first and last steps. Exits non-zero on a wrong figure."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    spans, t = [], 0
    # Per decode step (ns from its start): embedding 0-3000; a GEMV starting
    # early at 2000 (chained) and ending at 13000; a 500 ns gap; a merge
    # 13500-16000. Exposed: embedding 3000, GEMV 10000, merge 2500; idle 500.
    decode = [("embedding_kernel", 0, 3000), ("gemv", 2000, 13000), ("merge", 13500, 16000)]
    prompt = [("embedding_kernel", 0, 3000), ("gemm", 3000, 50000)]
    steps = [decode[1:]] + [decode] * 3 + [prompt] + [decode] * 2 + [decode[:2]]
    for st in steps:
        for name, a, b in st:
            spans.append({"kernel": name, "start_ns": t + a, "end_ns": t + b})
        t += max(b for _, _, b in st) + 1000
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for s in reversed(spans):  # the library writes in start order; the reader must not rely on it
            f.write(json.dumps(s) + "\n")
        path = f.name
    try:
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench/profile/timeline.py"), path,
                              "--json"], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    rows = [json.loads(l) for l in out.splitlines()]
    summary = rows[-1]
    by = {r["kernel"]: r for r in rows[:-1]}
    failures = []

    def expect(what, got, want):
        if abs(got - want) > 1e-9:
            failures.append(f"{what}: {got} (want {want})")

    # Kernels before the first step's start are dropped; the first and last
    # whole-looking steps too (the ring may have cut them), and the prompt's:
    # 4 of the 7 steps that start with an embedding.
    expect("steps", summary["steps"], 4)
    expect("span us", summary["span_us"], 16.0)
    expect("idle us", summary["idle_us"], 0.5)
    expect("gemv exposed", by["gemv"]["exposed_us_per_step"], 10.0)
    expect("gemv mean", by["gemv"]["mean_us"], 11.0)
    expect("embedding exposed", by["embedding_kernel"]["exposed_us_per_step"], 3.0)
    expect("merge exposed", by["merge"]["exposed_us_per_step"], 2.5)
    if "gemm" in by:
        failures.append("the prompt's step was counted")
    if failures:
        print("timeline_test: " + "; ".join(failures))
        return 1
    print("timeline_test: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
