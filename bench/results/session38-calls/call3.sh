#!/usr/bin/env bash
# Session 38's third call, with the lean prefill (wgmma_lean) and the fused merge for the mma walk
# at 2+ rows as defaults: the GPU tests but the recurrent, tensor-parallel and NCCL suites (which
# the two defaults do not reach; call 2 ran them), then bench/h200_roofline.sh within 560 s.
# After PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu
# mstar-run; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
t0=$SECONDS
left() { echo $((560 - (SECONDS - t0))); }
echo "== GPU tests"
timeout 240 "$bin/mstar_gpu_tests" --gtest_filter='-gpu_recurrent.*:gpu_tensor_parallel.*:gpu_nccl.*' \
  >"$final/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$final/tests.log"
echo "== bench/h200_roofline.sh ($((SECONDS - t0)) s)"
mkdir -p "$final/roof"
OUT=$final/roof timeout "$(left)" bash bench/h200_roofline.sh
echo "== done ($((SECONDS - t0)) s)"
