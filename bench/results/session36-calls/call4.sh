#!/usr/bin/env bash
# Session 36's fourth call: main with the split-K GEMV shapes and their narrow-product rule
# (branch gemv-splitk), the SSD update's L2 prefetch, Qwen3.5's fused q / k / v and the FlashInfer
# baseline (branch flashinfer-baseline). Their tests and memcheck over the new GEMV shapes; the
# 0.56B and the 8B shape at batch 1 with the rule off / on / forced, the prefetch off; then our
# attention against SDPA and FlashInfer 0.2.5 (modules prebuilt here, bench/flashinfer_prebuilt.sh).
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu and
# bench/baselines_wheels.sh; carry .carry .whl-baselines.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 90 "$bin/mstar_gpu_tests" --gtest_filter='gpu_linear.*:gpu_model_fused*:gpu_model_chained*:gpu_qwen3_5_fused*:gpu_qwen3_5_chained*:gpu_recurrent*:tiny/gpu_model_parity*:qwen3_5/gpu_qwen3_5_parity*' \
  >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log"
grep -c "^\[       OK" "$out/tests.log"
echo "== memcheck, the GEMV's shapes ($((SECONDS - t0)) s)"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_linear.every_gemv_shape*:gpu_linear.rms_norm*' >"$out/memcheck.log" 2>&1
echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 1 ($((SECONDS - t0)) s)"
for mode in split0 rule split8 split11 ssd0 split0 rule; do
  env=()
  case $mode in
    split0) env=(MSTAR_GEMV_SPLIT=0) ;;
    split8) env=(MSTAR_GEMV_SPLIT=8) ;;
    split11) env=(MSTAR_GEMV_SPLIT=11) ;;
    ssd0) env=(MSTAR_SSD_PREFETCH=0) ;;
  esac
  env "${env[@]}" timeout 30 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 \
    --prompt-len 32 --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' |
    sed "s/^{/{\"mode\": \"$mode\", /" >>"$out/nh056-b1.jsonl"
done
python3 - "$out/nh056-b1.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['mode']:8s} step_ms {r['step_ms']:.4f}", round(r["roofline_decode"]["bandwidth_fraction"], 4),
          r.get("tokens_digest"))
PY
echo "== 8B shape batch 1 ($((SECONDS - t0)) s)"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -1 | cut -c1-200
for mode in rule split0; do
  env=()
  [[ $mode == split0 ]] && env=(MSTAR_GEMV_SPLIT=0)
  env "${env[@]}" timeout 40 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --batch 1 \
    --prompt-len 32 --new-tokens 64 --repeats 2 --json 2>/dev/null | grep '^{"batch' |
    sed "s/^{/{\"mode\": \"$mode\", /" >>"$out/nh8b-b1.jsonl"
done
python3 - "$out/nh8b-b1.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"8B {r['mode']:8s} step_ms {r['step_ms']:.4f}", round(r["roofline_decode"]["bandwidth_fraction"], 4))
PY
rm -rf "$ck"
echo "== FlashInfer ($((SECONDS - t0)) s)"
OUT=$out/fi FI_BUILD=0 timeout 200 bash bench/h200_flashinfer.sh 2>&1 | grep -E "^== |^\|" | cut -c1-220
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/tests.log" "$out/nh056-b1.jsonl" "$out/nh8b-b1.jsonl" "$final/" 2>/dev/null
tar czf "$final/call4.tgz" -C "$out" fi memcheck.log
ls -la "$final"
