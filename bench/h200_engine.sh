#!/usr/bin/env bash
# The engine on an H200 (the device machine), results under $OUT:
#   1. mstar_gpu_tests (kernels, pools on device arenas, the model through the
#      engine against the fixtures);
#   2. mstar-run --device cuda through the actors on a random ~100M
#      Nemotron-H (bench/transformers_decode.py make-checkpoint);
#   3. decode tokens/s at batch 1, 16 and 64 through the actors vs the direct
#      loop (mstar-bench-model-gpu --through actors|direct), same checkpoint,
#      same GPU, interleaved, and the ratio table (engine-table.md).
# Built here with scripts/pack-device.sh (binaries and libraries in .carry/).
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/env.txt"

echo "== GPU tests"
run_gpu_tests

echo "== mstar-run through the actors"
ckpt=$(mktemp -d)/nemotron_h_100m
python3 "$root/bench/transformers_decode.py" make-checkpoint --size 100m --out "$ckpt" | tee -a "$out/env.txt"
"$bin/mstar-run" --model "$ckpt" --device cuda --max-tokens 16 --prompt "The pools hold" 2>&1 | tee -a "$out/env.txt"

echo "== decode through the actors vs the direct loop"
: >"$out/engine-e2e.jsonl"
for round in 1 2; do
  for through in direct actors; do
    "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 --new-tokens 128 --repeats 3 \
      --through "$through" --json | tee -a "$out/engine-e2e.jsonl"
  done
  # The worker on a thread of its own (MSTAR_WORKER_THREAD), for comparison.
  MSTAR_WORKER_THREAD=1 "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 \
    --new-tokens 128 --repeats 3 --through actors --json |
    sed 's/"through":"actors"/"through":"actors_worker_thread"/' | tee -a "$out/engine-e2e.jsonl"
done
python3 - "$out" <<'PY'
import json, pathlib, sys, statistics
out = pathlib.Path(sys.argv[1])
rates = {}
for line in (out / "engine-e2e.jsonl").read_text().splitlines():
    if line.strip():
        r = json.loads(line)
        rates.setdefault((r["through"], r["batch"]), []).append(r["decode_tokens_per_s"])
rows = ["| batch | direct loop tok/s | through the actors tok/s | ratio | worker on its own thread tok/s | ratio |", "| --- | --- | --- | --- | --- | --- |"]
for b in sorted({k[1] for k in rates}):
    d = statistics.median(rates[("direct", b)]); a = statistics.median(rates[("actors", b)])
    w = statistics.median(rates.get(("actors_worker_thread", b), [float("nan")]))
    rows.append(f"| {b} | {d:,.0f} | {a:,.0f} | {a / d:.3f} | {w:,.0f} | {w / d:.3f} |")
(out / "engine-table.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
PY
