#!/usr/bin/env bash
# Session 44's last-seconds call: the new GPU tests alone, printed as they run (gtest's
# own lines, so that a call cut short still shows which passed), kernel tests first.
set -uo pipefail
source "$(dirname "$0")/common.sh"
for f in 'gpu_sampling.the_plan_kernel*:gpu_recurrent.ssd_update_reading_settled*:gpu_linear.bf16_linear_accumulates_onto*' \
  'gpu_model_plan_kernel.*:gpu_model_early_reads.*:gpu_model_side_download.*' \
  'gpu_model_fused_norms.*:gpu_qwen3_5_fused_norms.*'; do
  (($(left) > 5)) || break
  timeout "$(left)" "$bin/mstar_gpu_tests" --gtest_filter="$f" 2>&1 |
    grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|Failure|error" | cut -c1-160
done
echo "== done ($((SECONDS - t0)) s)"
