#!/usr/bin/env bash
# Session 35's fifth call: main at the final defaults (rows_mma from 16 decode rows, wgmma prefill,
# SSD rows chunked from 32 tokens, the batch-1 folds). The attention, model and recurrent GPU tests
# on them; decode attention on the defaults at 1 / 4 / 16 / 64 / 256 rows; every roofline (the 8B
# shape included).
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 150 "$bin/mstar_gpu_tests" --gtest_filter='*attention*:gpu_model*:gpu_qwen3_5*:gpu_recurrent*' \
  >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
timeout 60 "$bin/mstar-gpu-bench" --suite attention --rows 1 4 16 64 256 --prefill-rows 1 --graphs \
  --rounds 5 --json | grep '^{' >"$out/attn-defaults.jsonl"
python3 - "$out/attn-defaults.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['case']:44s} {r['us_per_call']:10.2f}", r.get("walk", ""))
PY
echo "== rooflines ($((SECONDS - t0)) s)"
OUT=$out/roof timeout 380 bash bench/h200_roofline.sh >"$out/roofline.log" 2>&1
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
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call5.tgz" -C "$out" .
