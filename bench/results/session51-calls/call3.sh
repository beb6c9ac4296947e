#!/usr/bin/env bash
# Session 51's third call: the RMS prologue's held form (MSTAR_GEMV_RMS_HELD, on by default
# in this build: a 256-thread block at K <= 2,048 loads its columns of the row and of the norm
# weight at once, one L2 round trip before the block sum rather than two). The GEMV and model
# tests under it first (the fused-norm tests hold it to the separate norm's bits), then three
# rounds of the 0.56B at batch 1, defaults against MSTAR_GEMV_RMS_HELD=0, Qwen3.5 0.5B (its
# RMS products too) the same way, and the defaults' step timeline. Pack as session 50's README
# says, with call3.sh; `CALL_LIMIT=480 bash .carry/call3.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_linear*:gpu_gemv*:gpu_model*:gpu_qwen3_5*' 180
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults rmsheld0" 1
if (($(left) > 120)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults rmsheld0" "--batch 1 --new-tokens 128 --repeats 3"
fi
(($(left) > 60)) && timeline_of defaults
finish call3
