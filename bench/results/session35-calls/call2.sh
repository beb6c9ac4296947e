#!/usr/bin/env bash
# Session 35's second call: branch s35-int (main + decode-attn5: the rows decode walk, selectable;
# attn-prefill-wgmma: the wgmma prefill kernel, selectable; b1-fold: the batch-1 folds, on by default).
# The new kernels' tests first (each bounded), then every other GPU test; the attention variants
# (decode walks, prefill kernels); the rows walk's ring sizes; the 0.56B at batch 1 with the folds
# on and off; step profiles of the 0.56B at 64 rows and of the SSD scan at one row.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
gt() {  # NAME SECONDS FILTER
  timeout "$2" "$bin/mstar_gpu_tests" --gtest_filter="$3" >"$out/tests-$1.log" 2>&1
  echo "== tests $1: exit $? ($((SECONDS - t0)) s)"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED |error" "$out/tests-$1.log" | head -12
}
rows='*/rows:*/rows_*:gpu_attention.rows_walk*'
pre='*gpu_attention_prefill*'
fold='gpu_linear.*:gpu_math.*:gpu_model_fused_norms.*:gpu_model_chained.*:gpu_model_graphs.*:gpu_model_launch.*:gpu_model_sampling.*:gpu_qwen3_5_fused_norms.*:gpu_qwen3_5_launch.*:gpu_qwen3_5_chained.*'
gt rows 60 "$rows"
gt prefill 60 "$pre"
gt fold 90 "$fold"
gt rest 170 "*-$rows:$pre:$fold"
echo "== attention variants ($((SECONDS - t0)) s)"
timeout 100 "$bin/mstar-gpu-bench" --suite attention --rows 1 16 64 256 --prefill-rows 1 8 \
  --attn-variants --graphs --rounds 5 --json | grep '^{' >"$out/attn-variants.jsonl"
python3 - "$out/attn-variants.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['case']:44s} {r['us_per_call']:10.2f}", r.get("wgmma", ""))
PY
echo "== rows ring sizes ($((SECONDS - t0)) s)"
for ring in 4:32 2:48 4:48 3:64; do
  MSTAR_ATTN_DECODE_WALK=4 MSTAR_ATTN_ROWS_STAGES=${ring%:*} MSTAR_ATTN_ROWS_STAGE_KIB=${ring#*:} \
    timeout 40 "$bin/mstar-gpu-bench" --suite attention --rows 1 64 256 --prefill-rows 1 --graphs \
    --rounds 5 --json | grep '^{"' | grep decode_attention | sed "s/^{/{\"ring\": \"$ring\", /" >>"$out/rows-rings.jsonl"
done
python3 - "$out/rows-rings.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["ring"], f"{r['case']:40s} {r['us_per_call']:10.2f}")
PY
echo "== 0.56B batch 1, folds on / off ($((SECONDS - t0)) s)"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-100
A=(--model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 128 --repeats 3 --json)
for run in on off on off; do
  if [[ $run == off ]]; then export MSTAR_DIRECT_DRAWS=0 MSTAR_ACT_FOLD=0 MSTAR_BF16_FOLD=0
  else unset MSTAR_DIRECT_DRAWS MSTAR_ACT_FOLD MSTAR_BF16_FOLD; fi
  timeout 60 "$bin/mstar-bench-model-gpu" "${A[@]}" | grep '^{' | sed "s/^{/{\"folds\": \"$run\", /" >>"$out/nh056-b1-folds.jsonl"
done
unset MSTAR_DIRECT_DRAWS MSTAR_ACT_FOLD MSTAR_BF16_FOLD
for f in direct act bf16; do
  case $f in direct) v=MSTAR_DIRECT_DRAWS ;; act) v=MSTAR_ACT_FOLD ;; bf16) v=MSTAR_BF16_FOLD ;; esac
  env $v=0 timeout 60 "$bin/mstar-bench-model-gpu" "${A[@]}" | grep '^{' | sed "s/^{/{\"folds\": \"$f off\", /" >>"$out/nh056-b1-folds.jsonl"
done
python3 - "$out/nh056-b1-folds.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["folds"], "step_ms %.4f" % r["step_ms"], "fraction %.4f" % r["roofline_decode"]["bandwidth_fraction"], r.get("tokens_digest"))
PY
rm -rf "$ck"
echo "== profiles ($((SECONDS - t0)) s)"
OUT=$out/prof timeout 150 bash bench/h200_profile.sh nh056-decode64 ssd-1row 2>&1 | tail -32 | cut -c1-160
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call2.tgz" -C "$out" .
