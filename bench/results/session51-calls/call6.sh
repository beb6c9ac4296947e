#!/usr/bin/env bash
# Session 51's sixth call, NOT RUN (the session's device budget was spent; for the next
# session, first): the conv fold's one channel a lane (lane r of a warp holds row r's taps and
# window: the conv form 56 registers at entry 5 rather than 64, 96 at entry 4 rather than 128,
# entry 12 80 with no spill) and entry 12 back (entry 4 under three blocks an SM), so that the
# 0.56B's in_proj (322 blocks of entry 4's shape) fits one wave for the one-wave pick
# (MSTAR_GEMV_WAVE_PICK=4,12). Neither has run on a GPU: the GEMV tests first (the conv fold
# against the two launches bit for bit at every entry, 12 included), then three rounds of the
# 0.56B at batch 1 (defaults, `4,12`, `12`), the faster's step timeline, Qwen3.5 0.5B the
# same way, and its step timeline. Also the plan inlined in the plan kernel's parameters (MSTAR_PLAN_INLINE=1, also
# unrun): its tests, then its A/B in the same rounds. Pack as session 51's README says, with call6.sh; `CALL_LIMIT=420 bash
# .carry/call6.sh`.
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
finish call6
