#!/usr/bin/env bash
# Session 50's third call: the one-wave pick as the default (entry 4 at K <= 2,048, call2's
# winner) against MSTAR_GEMV_WAVE_PICK=none: the GEMV and model tests (the pick's own bit test
# among them), three rounds of the 0.56B at batch 1, Qwen3.5 0.5B (the 8B shape's products
# all have K >= 4,096, which the pick leaves alone), then the split-attention variants call2
# did not reach (split-rest.filter).
# Pack as session 49's call1.sh says, with call3.sh and split-rest.filter;
# `CALL_LIMIT=330 bash .carry/call3.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== GEMV and model tests ($((SECONDS - t0)) s)"
gpu_tests 'gpu_linear*:gpu_gemv*:gpu_model*:gpu_qwen3_5*' 120
checkpoint nh056 nemotron_h-0.56b
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
nh056_rounds 3 "defaults wpicknone" 1
echo "== Qwen3.5 0.5B ($((SECONDS - t0)) s)"
if (($(left) > 80)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults wpicknone" "--batch 1 --new-tokens 128 --repeats 3"
fi
echo "== the split-attention variants not reached ($((SECONDS - t0)) s)"
(($(left) > 30)) && gpu_tests "$(cat "$(dirname "$0")/split-rest.filter")" $(($(left) - 10))
finish call3
