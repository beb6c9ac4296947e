#!/usr/bin/env bash
# compute-sanitizer over GPU tests on an H200 (the device machine), results
# under $OUT: memcheck.log and racecheck.log, each with its summary lines
# printed. The default filters are the kernels of issue 17 that no
# sanitizer has run over yet (session 35's whole-row decode walks, the
# warpgroup-MMA prefill kernels, the GEMV activation fold); pass your own
# as MEMCHECK / RACECHECK. Each tool is bounded (SECONDS_EACH, default
# 240) and fails the script when it reports an error (exit 9).
#   bash bench/h200_sanitize.sh
#   MEMCHECK='gpu_linear.*' RACECHECK='gpu_linear.*' bash bench/h200_sanitize.sh
# Needs scripts/pack-device.sh mstar_gpu_tests (.carry, binaries unpacked under .carry/bin).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $cs ]] || { echo "h200_sanitize.sh: no compute-sanitizer ($cs)" >&2; exit 2; }
new_kernels='*/rows:*/rows_mma:*rows_mblock:*rows_mma_mblock:kernels/gpu_attention_prefill.*/wgmma*'
new_kernels+=':gpu_linear.activation_linear*'
memcheck=${MEMCHECK:-$new_kernels}
racecheck=${RACECHECK:-$new_kernels}
each=${SECONDS_EACH:-240}
rc=0
run() {  # TOOL FILTER
  local log=$out/$1.log
  timeout "$each" "$cs" --tool "$1" --error-exitcode 9 "$bin/mstar_gpu_tests" --gtest_filter="$2" \
    >"$log" 2>&1
  local r=$?
  echo "== $1: exit $r ($log)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED|tests ran" "$log" | head -8
  if ((r != 0)); then rc=1; fi
}
run memcheck "$memcheck"
run racecheck "$racecheck"
exit $rc
