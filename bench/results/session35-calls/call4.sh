#!/usr/bin/env bash
# Session 35's fourth call: branch s35-int2 (main + decode-attn6: the rows walk on tensor cores,
# MSTAR_ATTN_DECODE_WALK=5; attn-prefill-wgmma2: the warp-specialised wgmma prefill, wgmma_ws /
# wgmma_ws_pp) on main's new defaults (rows walk from 64 decode rows, wgmma prefill, SSD rows
# chunked from 32 tokens). The new kernels' tests first (bounded), every other GPU test, the
# attention variants, the 0.56B rooflines.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
gt() {  # NAME SECONDS FILTER
  timeout "$2" "$bin/mstar_gpu_tests" --gtest_filter="$3" >"$out/tests-$1.log" 2>&1
  local rc=$?
  echo "== tests $1: exit $rc ($((SECONDS - t0)) s)"
  grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests-$1.log" | head -12
  return $rc
}
gt rows_mma 60 '*rows_mma*'
gt ws 60 'kernels/gpu_attention_prefill.*/wgmma_ws'
gt ws_pp 60 'kernels/gpu_attention_prefill.*/wgmma_ws_pp'
gt rest 220 '*-*rows_mma*:*wgmma_ws*'
echo "== attention variants ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar-gpu-bench" --suite attention --rows 1 16 64 256 --prefill-rows 1 8 \
  --attn-variants --graphs --rounds 5 --json | grep '^{' >"$out/attn-variants.jsonl"
python3 - "$out/attn-variants.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "rows" in r["case"] or "prefill" in r["case"] or r["case"].startswith("decode_attention_split_b") \
            or r["case"].startswith("decode_attention_b"):
        print(f"{r['case']:44s} {r['us_per_call']:10.2f}")
PY
echo "== 0.56B rooflines ($((SECONDS - t0)) s)"
OUT=$out/roof timeout 200 bash bench/h200_roofline.sh --no-8b >"$out/roofline.log" 2>&1
echo "roofline exit $?"
for f in "$out"/roof/nh056-*.jsonl; do
  grep -h '^{' "$f" | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l)
    k = 'roofline_prefill' if r['prompt_len'] == 2048 else 'roofline_decode'
    rf = r[k]
    print('$(basename "$f")', r['batch'], 'step_ms %.4f' % r['step_ms'], 't1_ms %.2f' % (1e3 * min(r['t1_s'])),
          {x: round(v, 4) for x, v in rf.items() if 'fraction' in x})
"
done
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call4.tgz" -C "$out" .
