#!/usr/bin/env bash
# Session 43's last try, with ~260 s of device time: the model tests under the new defaults and
# the side-download test alone, their log straight into $OUT/tests.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if [[ ! -d .carry/bin ]]; then (cd .carry && tar xJf bins.tar.xz); fi
source bench/device_env.sh
timeout 30 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_model_fused_norms.*:gpu_model_side_download.*:gpu_qwen3_5_fused_norms.*:gpu_model_chained.*' \
  >"$out/tests.log" 2>&1
echo "exit $?"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[       OK \]" "$out/tests.log"
