#!/usr/bin/env bash
# Session 52's first call: session 51's call6 as written (see bench/results/session51-calls/call6.sh
# for what it tests). Pack as session 51's README says; `CALL_LIMIT=420 bash .carry/call1.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_linear*:gpu_gemv*:gpu_model_fused_norms*:gpu_model_plan_kernel*:gpu_sampling.the_plan_kernel*' 170
checkpoint nh056 nemotron_h-0.56b
modes="defaults wpick412 wpick12 planinline"
nh056_rounds 3 "$modes" 1
best=$(fastest_modes 1 "$modes")
echo "== fastest: $best"
(($(left) > 150)) && timeline_of "$best"
if (($(left) > 100)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults wpick412" "--batch 1 --new-tokens 128 --repeats 3"
fi
# Qwen3.5 0.5B's step (0.54 of the roofline on an H100, 0.42 on the H200 in session 51): where
# it goes, kernel by kernel.
(($(left) > 60)) && timeline_of defaults qwen
finish call1
