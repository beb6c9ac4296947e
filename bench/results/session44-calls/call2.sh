#!/usr/bin/env bash
# Session 44's second call: the 0.56B step's timeline with the defaults and with all five
# opt-in changes (CUPTI, the carried .profile/libmstar_kernel_times.so; bench/profile/timeline.py,
# the plan kernel's step starting at upload_plan_kernel), then the A/B again with what is left.
# Results in $OUT/call2.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== timelines ($((SECONDS - t0)) s)"
cupti=$(cupti_lib_dir)
for mode in defaults all5; do
  (($(left) > 60)) || break
  n=nh056-decode1-$mode
  start=loopback_kernel
  [[ $mode == all5 ]] && start=upload_plan_kernel
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
ab_runs nh056 "defaults all5" "--batch 1 4 --new-tokens 128 --repeats 3"
finish call2
