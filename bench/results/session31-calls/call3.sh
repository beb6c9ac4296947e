#!/usr/bin/env bash
# Session 31's third device call: step profiles of merged main, racecheck.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t0=$SECONDS
timeout 200 bash bench/h200_profile.sh nemotron-prefill nemotron-decode1 qwen-prefill 2>&1 | tail -60
echo "== racecheck ($((SECONDS - t0)) s)"
san=/usr/local/cuda/bin/compute-sanitizer
timeout 90 "$san" --tool racecheck --error-exitcode 3 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_attention_prefill.rows_resuming*' >"$out/racecheck-attention.log" 2>&1
echo "attention exit $?"; grep -E "^\[  (PASSED|FAILED)|RACECHECK SUMMARY|ERROR SUMMARY" "$out/racecheck-attention.log"
left=$((520 - (SECONDS - t0)))
timeout $left "$san" --tool racecheck --error-exitcode 3 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_recurrent.ssd_chunked*' >"$out/racecheck-ssd.log" 2>&1
echo "ssd exit $? ($((SECONDS - t0)) s)"; grep -E "^\[  (PASSED|FAILED)|RACECHECK SUMMARY|ERROR SUMMARY" "$out/racecheck-ssd.log"; grep -c "^\[ error" "$out/racecheck-ssd.log"
