#!/usr/bin/env bash
# Session 36's first call: main at the start of the stop (session 35's final defaults, the launchers'
# shared host setup, the models' one launch_linear, none of which ran on a GPU yet). Every GPU test;
# compute-sanitizer memcheck and racecheck over session 35's new kernels; the 0.56B's batch-1 step
# profile (CUPTI); Nsight Compute over the kernels furthest from the goals.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 150 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1
echo "== every GPU test: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/gpu-tests.log" | head -20
echo "== sanitizers ($((SECONDS - t0)) s)"
OUT=$out/san SECONDS_EACH=90 bash bench/h200_sanitize.sh
echo "== profile ($((SECONDS - t0)) s)"
OUT=$out/prof timeout 50 bash bench/h200_profile.sh nh056-decode1 2>&1 | tail -16
echo "== ncu ($((SECONDS - t0)) s)"
OUT=$out/ncu SECONDS_EACH=40 timeout 170 bash bench/h200_ncu.sh 2>&1
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/gpu-tests.log" "$final/"
tar czf "$final/call1.tgz" -C "$out" san prof ncu
ls -la "$final"
