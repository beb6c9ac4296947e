#!/usr/bin/env bash
# Session 43's third call: the 0.56B's batch-1 step timeline with all five changes and with none
# (CUPTI, the carried .profile/libmstar_kernel_times.so; bench/profile/timeline.py), then Qwen3.5
# 0.5B at batch 1 with its three folds (lookup, delta-net conv, argmax) and with none, each twice,
# alternated. Results in $OUT/call3.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== timelines ($((SECONDS - t0)) s)"
cupti=$(cupti_lib_dir)
for mode in all none; do
  (($(left) > 60)) || break
  n=nh056-decode1-$mode
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of $mode) "LD_LIBRARY_PATH=$cupti:$LD_LIBRARY_PATH" \
    "CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so" "MSTAR_KERNEL_PROFILE=$w/$n.txt" \
    "MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl" timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- $n (exit $?)"
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start loopback_kernel \
    >"$w/$n.steps.txt" 2>&1
  head -22 "$w/$n.steps.txt" | cut -c1-120
done
if [[ -s $w/nh056-decode1-all.timeline.jsonl && -s $w/nh056-decode1-none.timeline.jsonl ]]; then
  echo "-- all against none, kernel by kernel"
  python3 bench/profile/timeline.py "$w/nh056-decode1-all.timeline.jsonl" \
    --against "$w/nh056-decode1-none.timeline.jsonl" --step-start loopback_kernel \
    >"$w/nh056-decode1-all-against-none.txt" 2>&1
  head -30 "$w/nh056-decode1-all-against-none.txt" | cut -c1-120
fi
rm -rf "$ck/nh056"
echo "== Qwen3.5 0.5B batch 1 ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 100)); then
  python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
    >/dev/null 2>&1
  ab_runs qwen "folds none" "--batch 1 --new-tokens 128 --repeats 3"
fi
finish call3
