#!/usr/bin/env bash
# Session 51's first call: session 50's call5 (turned away there for want of budget), three
# rounds. The SSD update releasing the next kernel once its state's loads are issued
# (MSTAR_SSD_RELEASE=loads), the one-wave pick off and with entry 12 (entry 4 capped to three
# blocks an SM, so the in_proj fits one wave too) against the defaults, the 0.56B at batch 1;
# the SSD update's tests under `ssdrel`; the fastest mode's step timeline; the update alone
# under Nsight Compute (bench/h200_ncu.sh ssd-update) in the time left. Before it,
# `gpu_linear.every_gemv*` and the one-wave pick's test (entry 12 has not run on a GPU yet).
# Pack as session 50's README says, with call1.sh; `CALL_LIMIT=480 bash .carry/call1.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
gpu_tests 'gpu_linear.every_gemv*:gpu_linear.the_one_wave_pick*' 60
checkpoint nh056 nemotron_h-0.56b
modes="defaults wpicknone ssdrel wpick12 wpick412"
nh056_rounds 3 "$modes" 1
best=$(fastest_modes 1 "$modes")
echo "== fastest: $best"
(($(left) > 100)) && timeline_of "$best"
if (($(left) > 40)); then
  export MSTAR_SSD_RELEASE=loads
  gpu_tests '*ssd_update*:*gated_norm_fold*' 30
  unset MSTAR_SSD_RELEASE
fi
echo "== the SSD update under Nsight Compute ($((SECONDS - t0)) s)"
(($(left) > 40)) && SECONDS_EACH=$(($(left) - 10)) bash bench/h200_ncu.sh ssd-update
finish call1
