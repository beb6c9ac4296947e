#!/usr/bin/env bash
# Session 44's first call: the tests of this session's five opt-in changes and of session 43's
# untested defaults, then the 0.56B at batch 1 in each of the A/B modes (common.sh's envs_of),
# twice, alternated. Results in $OUT/call1.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== tests"
timeout "$(($(left) < 150 ? $(left) : 150))" "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_sampling.the_plan_kernel*:gpu_linear.bf16_linear_accumulates*:gpu_model_early_reads.*:gpu_recurrent.ssd_update_reading_settled*:gpu_model_plan_kernel.*:gpu_model_side_download.*:gpu_model_fused_norms.*:gpu_qwen3_5_fused_norms.*:gpu_model_chained.*:gpu_model_graphs.*:gpu_model_fused_qkv.*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
if (($(left) > 80)); then
  python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
  ab_runs nh056 "defaults all5 side plan plan2 early resid normpf" "--batch 1 --new-tokens 128 --repeats 3"
fi
finish call1
