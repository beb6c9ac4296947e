#!/usr/bin/env bash
# Session 31's second device call: merged main (attn-prefill2 + ssd-mma).
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
t0=$SECONDS
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED |ERROR SUMMARY|RACECHECK SUMMARY" "$1" | head -30; }
echo "== main: every GPU test"
timeout 150 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"; sum "$out/gpu-tests.log"
grep -E "^\[ error +\]" "$out/gpu-tests.log" | grep -i -E 'prefill|ssd_chunk' | sort -k4 -g | tail -4
san=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  echo "== $tool ($((SECONDS - t0)) s)"
  timeout 120 "$san" --tool "$tool" --error-exitcode 3 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_attention_prefill.one_long*:gpu_attention_prefill.rows_resuming*:gpu_recurrent.ssd_chunked*' >"$out/sanitizer-$tool.log" 2>&1
  echo "$tool exit $?"; sum "$out/sanitizer-$tool.log"
done
echo "== roofline ($((SECONDS - t0)) s)"
timeout 330 bash bench/h200_roofline.sh --no-8b 2>&1 | tail -20
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call2.tgz" -C "$out" .
