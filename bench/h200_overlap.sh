#!/usr/bin/env bash
# Issue 14's measurement on an H200 (the device machine), results under $OUT:
# decode tokens/s and the device's idle time between consecutive decode steps
# (CUDA events around each forward: mstar-bench-model-gpu's timeline), sync vs
# overlap schedule, at batch 1, 16, 64 and 256, on a random ~100M Nemotron-H
# and on a ~0.6B one (hidden 2048, the same pattern), both made by
# bench/transformers_decode.py make-checkpoint. Sync and overlap runs
# alternate, twice each, so drift on the machine hits both; the table
# (overlap-table.md) takes the median of the rounds.
# Built here with scripts/pack-device.sh (binaries and libraries in .carry/);
# plot with bench/plot_overlap.py OUT/overlap.jsonl.
#
#   bash bench/h200_overlap.sh [--quick]   (--quick: 32 tokens, one round)
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
new_tokens=128 repeats=3 rounds=2
if [[ ${1:-} == --quick ]]; then new_tokens=32 repeats=1 rounds=1; fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/env.txt"
# The launch / loopback path first: pipelined steps must draw the blocking ones.
"$bin/mstar_gpu_tests" --gtest_filter='gpu_model_launch.*:gpu_model.*' 2>&1 | tee "$out/gpu-launch-tests.log" |
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran"

: >"$out/overlap.jsonl"
for size in 100m 600m; do
  ckpt=$(mktemp -d)/nemotron_h_$size
  python3 "$root/bench/transformers_decode.py" make-checkpoint --size "$size" --out "$ckpt" |
    tee -a "$out/env.txt"
  for ((round = 1; round <= rounds; ++round)); do
    for schedule in sync overlap; do
      "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 256 --new-tokens "$new_tokens" \
        --repeats "$repeats" --schedule "$schedule" --json |
        sed "s/^{/{\"size\":\"$size\",\"round\":$round,/" | tee -a "$out/overlap.jsonl"
      # The runtime behind mstar-run / mstar-serve: conductor, pool and worker actors.
      if [[ $size == 100m ]]; then
        "$bin/mstar-bench-model-gpu" --model "$ckpt" --batch 1 16 64 256 \
          --new-tokens "$new_tokens" --repeats "$repeats" --schedule "$schedule" --json \
          --through actors | sed "s/^{/{\"size\":\"$size-actors\",\"round\":$round,/" |
          tee -a "$out/overlap.jsonl"
      fi
    done
  done
done
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
runs = {}
for line in (out / "overlap.jsonl").read_text().splitlines():
    if line.strip():
        r = json.loads(line)
        runs.setdefault((r["size"], r["batch"], r["schedule"]), []).append(r)
med = lambda rs, k: statistics.median(r[k] for r in rs)
rows = ["| model | batch | sync tok/s | overlap tok/s | overlap / sync | sync idle gap us (median) | overlap idle gap us (median) | device busy us (median) | same tokens |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
mismatch = 0
for size, batch in sorted({(k[0], k[1]) for k in runs}):
    s, o = runs[(size, batch, "sync")], runs[(size, batch, "overlap")]
    ts, to = med(s, "decode_tokens_per_s"), med(o, "decode_tokens_per_s")
    digests = {r.get("tokens_digest") for r in s + o}
    same = "yes" if len(digests) == 1 else "NO"
    mismatch += len(digests) != 1
    rows.append(f"| {size} | {batch} | {ts:,.0f} | {to:,.0f} | {to / ts:.3f} | "
                f"{med(s, 'idle_gap_us_median'):.1f} | {med(o, 'idle_gap_us_median'):.1f} | "
                f"{med(o, 'device_busy_us_median'):.1f} | {same} |")
(out / "overlap-table.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
if mismatch:
    sys.exit(f"{mismatch} configurations drew different tokens in sync and overlap")
PY
