#!/usr/bin/env bash
# Session 45's second call: the GPU tests session 44 left unrun after side downloads became
# the default (the model tests that now make their plain engine with them off, the
# tensor-parallel ones), then the 0.56B at batch 1 with the defaults against side downloads
# off and session 44's opt-in switches (common.sh's envs_of), alternated, then the step's
# timeline with the defaults and with the plan kernel in the graph. Results in $OUT/call2.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== tests"
timeout "$(($(left) < 150 ? $(left) : 150))" "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_model_side_download.*:gpu_model_plan_kernel.*:gpu_tensor_parallel.*:gpu_model_chained.*:gpu_model_graphs.*:gpu_overlap*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
ab_runs nh056 "defaults noside plan2 early resid all5" "--batch 1 --new-tokens 128 --repeats 3 --roofline-rounds 1"
cupti=$(cupti_lib_dir)
for mode in defaults plan2; do
  (($(left) > 60)) || break
  n=nh056-decode1-$mode
  start=loopback_kernel
  [[ $mode == plan2 ]] && start=upload_plan_kernel
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of $mode) "LD_LIBRARY_PATH=$cupti:$LD_LIBRARY_PATH" \
    "CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so" "MSTAR_KERNEL_PROFILE=$w/$n.txt" \
    "MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl" timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- $n (exit $?)"
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start "$start" \
    >"$w/$n.steps.txt" 2>&1
  head -22 "$w/$n.steps.txt" | cut -c1-120
done
finish call2
