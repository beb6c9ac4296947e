#!/usr/bin/env bash
# Session 32's fourth call (main with cuda-ipc merged, the SSD update's entry 8 and the norm fold): every GPU test
# (the P/D pair over CUDA IPC on one GPU included), the transport tests, then the rooflines (bench/h200_roofline.sh).
# After scripts/pack-device.sh mstar_gpu_tests mstar_transport_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run;
# carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== every GPU test"
timeout 180 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED |pd_cuda_ipc.*(OK|FAILED)|measured\] .*(pull|P/D)" "$out/gpu-tests.log" | head -24
timeout 60 "$bin/mstar_transport_tests" >"$out/transport-tests.log" 2>&1; echo "transport exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/transport-tests.log"
echo "== rooflines ($((SECONDS - t0)) s)"
mkdir -p "$out/roofline"
OUT=$out/roofline timeout 330 bash bench/h200_roofline.sh 2>&1 | grep -vE "^model " | cut -c1-400
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call4.tgz" -C "$out" .
