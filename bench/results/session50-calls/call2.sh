#!/usr/bin/env bash
# Session 50's second call: the one-wave entry pick (MSTAR_GEMV_WAVE_PICK, gemv.cu: a GEMV
# whose rule-picked entry's grid is more than one wave takes the first listed entry of the
# same bits whose grid is one wave, so it too releases the next kernel at its start) against
# the defaults, three rounds of the 0.56B at batch 1 (the same digest expected); the fastest's
# timeline; the 8B shape and Qwen3.5 0.5B with the fastest pick; the model and GEMV tests
# under it; then the GPU tests call1 did not reach (the split-attention variants).
# Pack as session 49's call1.sh says, with call2.sh; `CALL_LIMIT=560 bash .carry/call2.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults wpick wpick4 wpick1 wpick3"
nh056_rounds 3 "$modes" 1
best=$(fastest_modes 1 "wpick wpick4 wpick1 wpick3")
echo "== timeline of $best ($((SECONDS - t0)) s)"
(($(left) > 60)) && timeline_of "$best" && grep -E "gemv|ssd_update" "$w/nh056-decode1-$best.launches.txt" | sed -n 1,12p
echo "== the 8B shape, $best ($((SECONDS - t0)) s)"
if (($(left) > 200)); then
  checkpoint nh8b nemotron_h-8b
  ab_runs nh8b "defaults $best" "--batch 1 --new-tokens 64 --repeats 2"
fi
echo "== Qwen3.5 0.5B, $best ($((SECONDS - t0)) s)"
if (($(left) > 100)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults $best" "--batch 1 --new-tokens 128 --repeats 3"
fi
echo "== model and GEMV tests under $best ($((SECONDS - t0)) s)"
if (($(left) > 60)); then
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  export $(envs_of "$best")
  gpu_tests 'gpu_model*:gpu_linear*:gpu_qwen3_5*:gpu_gemv*' $(($(left) - 90))
  unset MSTAR_GEMV_WAVE_PICK
fi
echo "== the split-attention variants ($((SECONDS - t0)) s)"
(($(left) > 40)) && gpu_tests 'every_walk_and_merge/*' $(($(left) - 15))
finish call2
