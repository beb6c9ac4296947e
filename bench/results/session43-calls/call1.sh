#!/usr/bin/env bash
# Session 43's first call: do the five opt-in batch-1 changes compute what they replace? The
# kernel tests (gpu_linear: the conv, lookup, activation, argmax and KV append folds at every
# launch shape) and the model tests (both models' folded engines against each fold turned off,
# tokens and logits bit for bit), the suites around them, then compute-sanitizer memcheck and
# racecheck over the folds' kernel tests. Results in $OUT/call1.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== GPU tests: linear, conv, attention's append, sampling, the models' folds"
timeout 260 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_fold_rules.*:gpu_linear.*:gpu_model_fused_norms.*:gpu_model_fused_qkv.*:gpu_model_chained.*:gpu_conv*:gpu_qwen3_5_fused_norms.*:gpu_sampling.*:gpu_math.*activat*:gpu_attention.decode_fast_path*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
grep -E "^\[       OK \]" "$w/tests.log" | sort -t'(' -k2 -n -r | head -5
echo "== compute-sanitizer ($((SECONDS - t0)) s; $(left) s left)"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
  if [[ -z $cs ]] || (($(left) <= 40)); then break; fi
  timeout $(($(left) / 2)) "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_linear.rms_norm_linear_with_*' >"$w/$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$w/$tool.log" | tail -1))"
done
finish call1
