#!/usr/bin/env bash
# Session 36's third call: decode attention on tensor cores below 16 rows (the mma walk in
# 128-position chunks, one wave) and rows_mma in 128-position chunks; the 0.56B's attention
# projecting q, k and v in one product at one token. Their tests; decode attention on the new
# defaults; the 0.56B at batch 1 new against old (MSTAR_ATTN_DECODE_WALK=0 MSTAR_QKV_FUSED=0) and
# each change alone; the batch-1 step's timeline.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 100 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_attention.*:every_walk*mma*:gpu_model*:tiny/gpu_model_parity*' >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
timeout 40 "$bin/mstar-gpu-bench" --suite attention --rows 1 4 8 16 32 64 256 --prefill-rows 1 --graphs \
  --rounds 5 --json | grep '^{' | grep decode >"$out/attn-defaults.jsonl"
python3 - "$out/attn-defaults.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['case']:36s} {r['us_per_call']:9.2f}", r.get("walk", ""), r.get("splits", ""))
PY
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 1 ($((SECONDS - t0)) s)"
for rep in 1 2; do
  for mode in new old walk-old qkv-old; do
    env=()
    [[ $mode == old || $mode == walk-old ]] && env+=(MSTAR_ATTN_DECODE_WALK=0)
    [[ $mode == old || $mode == qkv-old ]] && env+=(MSTAR_QKV_FUSED=0)
    for pl in 32 2048; do
      env "${env[@]}" timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 \
        --prompt-len $pl --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' |
        sed "s/^{/{\"mode\": \"$mode\", /" >>"$out/nh056-b1-modes.jsonl"
    done
  done
done
python3 - "$out/nh056-b1-modes.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['mode']:9s} prompt {r['prompt_len']:5d} step_ms {r['step_ms']:.4f}",
          round(r["roofline_decode"]["bandwidth_fraction"], 4))
PY
echo "== timeline ($((SECONDS - t0)) s)"
OUT=$out/prof timeout 45 bash bench/h200_profile.sh nh056-decode1 2>&1 | grep -A 16 "steps: span"
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/tests.log" "$out/attn-defaults.jsonl" "$out/nh056-b1-modes.jsonl" "$final/"
tar czf "$final/call3.tgz" -C "$out" prof
ls -la "$final"
