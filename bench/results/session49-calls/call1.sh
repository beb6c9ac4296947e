#!/usr/bin/env bash
# Session 49's first call: the staged GEMV (MSTAR_GEMV_STAGE=1: a plain one-row product
# whose block slices fit the SMs at once, the 0.56B's out_proj, copies its whole weight
# slice into shared memory before its chained wait, so it streams under the SSD update).
# Its bit-for-bit test, two rounds of the 0.56B at batch 1 against the defaults (the same
# digest expected), both step timelines, the model tests under it, then session 48's
# unrun attention tests under the direct-write default.
# Pack: `PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench
# mstar-bench-model-gpu`, `bash bench/profile/build.sh`, `cp bench/device_calls.sh
# bench/results/session49-calls/{common.sh,call1.sh} .carry/`, `rm -rf .carry/bin .carry/lib`;
# `CALL_LIMIT=330 bash .carry/call1.sh` carrying .carry and .profile/libmstar_kernel_times.so.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== staged GEMV tests ($((SECONDS - t0)) s)"
gpu_tests 'gpu_linear.staged*:gpu_linear.every_gemv*' 60
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults stage1" 1
echo "== timelines ($((SECONDS - t0)) s)"
for mode in stage1 defaults; do
  (($(left) > 60)) && timeline_of $mode
  grep -E "gemv|ssd_update" "$w/nh056-decode1-$mode.launches.txt" | sed -n 1,8p
done
echo "== model tests under the staged GEMV ($((SECONDS - t0)) s)"
(($(left) > 80)) && MSTAR_GEMV_STAGE=1 gpu_tests 'gpu_model*' $(($(left) - 60))
grep "^\[ RUN" "$w/tests.log" | tail -1
echo "== attention tests ($((SECONDS - t0)) s)"
(($(left) > 30)) && gpu_tests '*gpu_attention_walk*:*gpu_attention_split_variant*:gpu_attention.*' \
  $(($(left) - 15))
grep "^\[ RUN" "$w/tests.log" | tail -1
finish call1
