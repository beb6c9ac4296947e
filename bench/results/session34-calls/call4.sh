#!/usr/bin/env bash
# Session 34's fourth call: main at a907ff9 (ssd-scan5 merged: the walk in two halves per row where
# few blocks would walk, by shape). Every GPU test; the SSD bench by variant (default, 1 = one walk a
# row, 3 = halves, 4 = halves one stage) in the same call; compute-sanitizer memcheck over the chunked
# tests; the 0.56B prefill (1 / 8 x 2048, twice) on the defaults.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== every GPU test"
timeout 200 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED |tests ran" "$out/gpu-tests.log" | head -20
grep -E "^\[ error +\] ssd_chunked" "$out/gpu-tests.log" | awk '{print $(NF-2)}' | sort -g | tail -1 \
  | sed 's/^/chunked SSD worst normalised error: /'
echo "== ssd bench by variant ($((SECONDS - t0)) s)"
for v in default 1 3 4; do
  if [[ $v == default ]]; then unset MSTAR_SSD_VARIANT; else export MSTAR_SSD_VARIANT=$v; fi
  timeout 40 "$bin/mstar-gpu-bench" --suite ssd --graphs --rounds 5 --json | grep '^{' \
    | sed "s/^{/{\"ssd_variant\": \"$v\", /" >>"$out/ssd-bench.jsonl"
done
unset MSTAR_SSD_VARIANT
python3 - "$out/ssd-bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = sorted({r["case"] for r in rows if r["case"].startswith("ssd_scan") and "sequential" not in r["case"]})
vs = ["default", "1", "3", "4"]
print(f"{'us a call':24s}" + "".join(f"{v:>10s}" for v in vs))
for c in cases:
    us = {r["ssd_variant"]: r["us_per_call"] for r in rows if r["case"] == c}
    print(f"{c:24s}" + "".join(f"{us[v]:10.1f}" if v in us else f"{'-':>10s}" for v in vs))
PY
echo "== memcheck over the chunked tests ($((SECONDS - t0)) s)"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 90 "$cs" --tool memcheck --error-exitcode 9 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_recurrent.ssd_chunked*' >"$out/memcheck.log" 2>&1; echo "memcheck exit $?"
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " "$out/memcheck.log" | head -5
echo "== 0.56B ($((SECONDS - t0)) s)"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-60
for r in 1 2; do
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
    --new-tokens 2 --repeats 3 --json | grep '^{' | sed "s/^{/{\"run\": $r, /" >>"$out/nh056-prefill.jsonl"
done
rm -rf "$ck"
python3 - "$out/nh056-prefill.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        k = "roofline_prefill" if "prefill" in f else "roofline_decode"
        rf = r.get(k, {})
        print(f.rsplit("/", 1)[1], r.get("run", ""), "batch", r.get("batch"), "step_ms %.4f" % r.get("step_ms", 0),
              "compute %.4f" % rf.get("compute_fraction", 0), "bandwidth %.4f" % rf.get("bandwidth_fraction", 0))
PY
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call4.tgz" -C "$out" .
