#!/usr/bin/env bash
# Session 51's fourth call. Call3: the RMS prologue's held form gained 7 us a step on the
# 0.56B but Qwen3.5 0.5B lost 7-11 (K 1,024: the conv fold's taps and windows, moved after the
# prologue to keep the conv form's 64 registers, come back exposed after its short dots).
# This build asks L1 for them under the held prologue's loads (MSTAR_GEMV_CONV_PREFETCH, on by
# default). The GEMV, model, Qwen3.5 and recurrent tests first, then the 0.56B at batch 1
# (defaults, convpf0, rmsheld0: three rounds) and Qwen3.5 0.5B (the same modes, two runs each).
# Pack as session 50's README says, with call4.sh; `CALL_LIMIT=420 bash .carry/call4.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_linear*:gpu_gemv*:gpu_model*:gpu_qwen3_5*:gpu_recurrent.ssd_update*:gpu_recurrent.ssd_scan*' 150
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults convpf0 rmsheld0" 1
if (($(left) > 100)); then
  checkpoint qwen qwen3_5-0.5b
  ab_runs qwen "defaults convpf0 rmsheld0" "--batch 1 --new-tokens 128 --repeats 3"
fi
finish call4
