"""bench/profile/timeline.py on a timeline built here: decode steps (the
commonest kernel sequence) around a prompt's step, with
overlapping (chained) kernels and idle gaps whose charges are known, and a
ring that cut the first and last steps, the same steps with a kernel
folded away compared against them (--against), and the step's launches one
by one (--launches). Exits non-zero on a wrong figure."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_timeline(decode, prompt):
    """A timeline file: decode steps around a prompt's step, the first and
    last cut as a ring cuts them, written out of start order."""
    spans, t = [], 0
    steps = [decode[1:]] + [decode] * 3 + [prompt] + [decode] * 2 + [decode[:2]]
    for st in steps:
        for name, a, b in st:
            spans.append({"kernel": name, "start_ns": t + a, "end_ns": t + b})
        t += max(b for _, _, b in st) + 1000
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for s in reversed(spans):  # the library writes in start order; the reader must not rely on it
            f.write(json.dumps(s) + "\n")
        return f.name


def run(*args):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench/profile/timeline.py"), *args,
                          "--json"], check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines()]


def main():
    # Per decode step (ns from its start): embedding 0-3000; a GEMV starting
    # early at 2000 (chained) and ending at 13000; a 500 ns gap; a merge
    # 13500-16000. Exposed: embedding 3000, GEMV 10000, merge 2500; idle 500.
    decode = [("embedding_kernel", 0, 3000), ("gemv", 2000, 13000), ("merge", 13500, 16000)]
    prompt = [("embedding_kernel", 0, 3000), ("gemm", 3000, 50000)]
    # The same steps with the merge folded into the GEMV, which now ends at
    # 14000: exposed GEMV 11000, span 14 us.
    folded = [("embedding_kernel", 0, 3000), ("gemv", 2000, 14000)]
    path = write_timeline(decode, prompt)
    other = write_timeline(folded, prompt)
    try:
        rows = run(path)
        against = run(other, "--against", path)
        by_launch = run(path, "--launches")
    finally:
        os.unlink(path)
        os.unlink(other)
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
    # --against: the folded steps against the plain ones, largest change first.
    total = against[-1]
    diff = against[:-1]
    expect("compared span delta", total["delta_us"], -2.0)
    expect("compared kernels a step", total["kernels_per_step"][0], 2.0)
    expect("compared kernels a step (against)", total["kernels_per_step"][1], 3.0)
    if [r["kernel"] for r in diff] != ["merge", "gemv", "embedding_kernel"]:
        failures.append(f"compared order: {[r['kernel'] for r in diff]}")
    else:
        expect("merge delta", diff[0]["delta_us"], -2.5)
        expect("merge calls", diff[0]["calls_per_step"][0], 0.0)
        expect("gemv delta", diff[1]["delta_us"], 1.0)
        expect("embedding delta", diff[2]["delta_us"], 0.0)
    # --launches: the decode step's three launches in start order, their
    # mean start / end from the step's start, exposed time and overlap (the
    # GEMV started 1 us before the embedding ended).
    want = [("embedding_kernel", 0.0, 3.0, 3.0, 0.0), ("gemv", 2.0, 13.0, 10.0, 1.0),
            ("merge", 13.5, 16.0, 2.5, 0.0)]
    if [r["kernel"] for r in by_launch] != [w[0] for w in want]:
        failures.append(f"launches: {[r['kernel'] for r in by_launch]}")
    else:
        for r, (name, start, end, exposed, overlap) in zip(by_launch, want):
            expect(f"{name} start", r["start_us"], start)
            expect(f"{name} end", r["end_us"], end)
            expect(f"{name} exposed", r["exposed_us"], exposed)
            expect(f"{name} overlap", r["overlap_us"], overlap)
    if failures:
        print("timeline_test: " + "; ".join(failures))
        return 1
    print("timeline_test: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
