#!/usr/bin/env bash
# Session 49's fourth call: `wave` the default chain mode (a GEMV whose grid is one wave
# releases the next kernel at its start; call3, H100: 490.0 / 489.2 us against late's
# 500.4 / 499.2). Against `late` (MSTAR_GEMV_CHAIN=late): the 0.56B (two rounds), the 8B
# shape and Qwen3.5 0.5B at batch 1; then the GEMV, model and Qwen3.5 GPU tests under it
# (gpu_model_chained now also runs the late release; the early-reads test forces late).
# Pack as call1.sh says, with call4.sh; `CALL_LIMIT=330 bash .carry/call4.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 2 "defaults chainlate" 1
echo "== the 8B at batch 1 ($((SECONDS - t0)) s)"
if (($(left) > 220)); then
  checkpoint nh8b nemotron_h-8b
  echo "-- checkpoint ($((SECONDS - t0)) s)"
  ab_runs nh8b "defaults chainlate" "--batch 1 --new-tokens 64 --repeats 2"
  rm -rf "$ck/nh8b"
fi
echo "== Qwen3.5 0.5B at batch 1 ($((SECONDS - t0)) s)"
if (($(left) > 150)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults chainlate" "--batch 1 --new-tokens 128 --repeats 3"
fi
echo "== tests ($((SECONDS - t0)) s)"
(($(left) > 40)) && gpu_tests 'gpu_model*:gpu_linear*:gpu_qwen3_5*' $(($(left) - 15))
grep "^\[ RUN" "$w/tests.log" | tail -1
finish call4
