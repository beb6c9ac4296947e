#!/usr/bin/env bash
# Session 46's fourth call: the cluster fold with every block started before any writes
# another's shared memory (call3's racecheck: "a block that might not have entered
# yet"), at entry 8's 72 registers, on by default at batch 1. Its tests, memcheck and
# racecheck over the kernel test; the 0.56B at batch 1 under the defaults, without the
# fold and without either fold, alternated; batch 16 (the fold is not taken there); the
# default step's timeline; then the model, recurrent and parity tests while time is left.
# Results in $OUT/call4.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
fold='gpu_recurrent.ssd_update_with_the_gated_norm_fold*:gpu_recurrent.ssd_update_gated_norm_fold*:gpu_model_ssd_norm_fold.*'
echo "== the fold's tests ($((SECONDS - t0)) s)"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter="$fold" >"$w/fold-tests.log" 2>&1
echo "exit $?"
grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Which is|launch [0-9]" "$w/fold-tests.log" | head -20 | cut -c1-160
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout 90 "$cs" --tool $tool "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_recurrent.ssd_update_with_the_gated_norm_fold*' >"$w/$tool.log" 2>&1
  echo "$tool: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$w/$tool.log" | head -1)"
done
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
ab_runs nh056 "defaults nofold nofoldgated0" "--batch 1 16 --new-tokens 128 --repeats 3 --roofline-rounds 1"
echo "== timeline ($((SECONDS - t0)) s)"
(($(left) > 90)) && timeline_of defaults
rm -rf "$ck/nh056"
echo "== model, recurrent and parity tests ($((SECONDS - t0)) s; $(left) s left)"
timeout "$(($(left) - 15))" "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_model*:gpu_recurrent.ssd*:*parity*:gpu_tensor_parallel.*:-gpu_model_ssd_norm_fold.*' \
  >"$w/gpu-tests.log" 2>&1
echo "exit $?"
grep -E "^\[==========\]|^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]" "$w/gpu-tests.log" | head -20
echo "ok: $(grep -c '^\[       OK \]' "$w/gpu-tests.log")"
grep "^\[  FAILED  \]" "$w/gpu-tests.log" | head
tail -2 "$w/gpu-tests.log" | cut -c1-160
finish call4
