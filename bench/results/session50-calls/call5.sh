#!/usr/bin/env bash
# Session 50's fifth call, NOT RUN (the budget's last 245 s were too little to start a
# machine; for the next session): the SSD update releasing the next kernel once its state's
# loads are issued (MSTAR_SSD_RELEASE=loads), the one-wave pick off (on an H200: the pick's
# figure there) and with entry 12 (entry 4 capped to three blocks an SM, so the in_proj
# fits one wave too) against the defaults, two rounds of the 0.56B at batch 1; the SSD
# update's tests under it; the update alone under Nsight Compute (bench/h200_ncu.sh
# ssd-update) in the time left. Before it, `gpu_linear.every_gemv*` and the one-wave pick's
# test (entry 12 has not run on a GPU yet).
# Pack as session 49's call1.sh says, with call5.sh; `CALL_LIMIT=240 bash .carry/call5.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
gpu_tests 'gpu_linear.every_gemv*:gpu_linear.the_one_wave_pick*' 60
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults wpicknone ssdrel wpick12 wpick412" 1
if (($(left) > 40)); then
  export MSTAR_SSD_RELEASE=loads
  gpu_tests '*ssd_update*:*gated_norm_fold*' 30
  unset MSTAR_SSD_RELEASE
fi
echo "== the SSD update under Nsight Compute ($((SECONDS - t0)) s)"
(($(left) > 40)) && SECONDS_EACH=$(($(left) - 10)) bash bench/h200_ncu.sh ssd-update
finish call5
