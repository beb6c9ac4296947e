#!/usr/bin/env bash
# Session 36's fifth call: main at its final defaults (the mma decode walk below 16 rows,
# 128-position split chunks, q / k / v in one product at one token, entry 6 of the GEMV for
# products under two blocks an SM; the SSD prefetch taken out). The GEMV and model tests; every
# roofline (the 8B shape included); FlashInfer's prefill again with its output check made
# NaN-proof and a workspace fa2 fits in.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run and
# bench/baselines_wheels.sh; carry .carry .whl-baselines.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 70 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_model_fused*:gpu_recurrent*:gpu_model_chained*' \
  >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
grep -c "^\[       OK" "$out/tests.log"
echo "== rooflines ($((SECONDS - t0)) s)"
OUT=$out/roof timeout 300 bash bench/h200_roofline.sh >"$out/roofline.log" 2>&1
echo "roofline exit $?"
grep -E "make_checkpoint 8b|requests at" "$out/roofline.log" | cut -c1-300
for f in "$out"/roof/nh056-*.jsonl <(grep -h '^{"batch' "$out/roof/nh8b.log"); do
  grep -h '^{' "$f" | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    k = 'roofline_prefill' if r['prompt_len'] == 2048 else 'roofline_decode'
    rf = r[k]
    print('$(basename "$f")', r['params'], r['batch'], r['prompt_len'], 'step_ms %.4f' % r['step_ms'],
          't1_ms %.2f' % (1e3 * min(r['t1_s'])), {x: round(v, 4) for x, v in rf.items() if 'fraction' in x})
"
done
echo "== FlashInfer prefill ($((SECONDS - t0)) s)"
src=/tmp/baselines-src; mkdir -p "$src" /tmp/flashinfer-prebuilt
tar xzf .whl-baselines/flashinfer_python-0.2.5.tar.gz -C "$src"
tar xJf .whl-baselines/flashinfer-0.2.5-ops-*.tar.xz -C /tmp/flashinfer-prebuilt
timeout 100 python3 bench/baselines_h200.py --json --parts flashinfer --rows 1 --prefill-rows 1 8 \
  --rounds 5 --flashinfer-src "$src/flashinfer_python-0.2.5" --flashinfer-cache /tmp/flashinfer_build \
  --flashinfer-prebuilt /tmp/flashinfer-prebuilt/ops >"$out/flashinfer-prefill.jsonl" 2>"$out/flashinfer.err"
echo "flashinfer exit $?"
python3 - "$out/flashinfer-prefill.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    r = json.loads(l)
    if "refused" in r:
        print(r["case"], r.get("backend"), "refused:", r["refused"][:200])
    elif "us_per_call" in r:
        print(f"{r['case']:28s} {r.get('backend', ''):18s} {r.get('mode', ''):6s} {r['us_per_call']:9.2f} us"
              f" err {r.get('max_abs_err')}")
PY
tail -3 "$out/flashinfer.err"
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/tests.log" "$out/flashinfer-prefill.jsonl" "$final/" 2>/dev/null
tar czf "$final/call5.tgz" -C "$out" roof roofline.log
ls -la "$final"
