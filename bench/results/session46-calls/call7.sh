#!/usr/bin/env bash
# Session 46's seventh call: the batch-1 step's attention layers (split walk ~8 us after
# the q / k / v GEMV, its merge kernel ~2.5 us more, two layers a step): the 0.56B at
# batch 1 under the defaults, the fused merge at one row, 32-position chunks with the
# block and the fused merge, and no split, alternated. Results in $OUT/call7.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
for rep in 1 2; do
  for mode in defaults merge2 chunk32 chunk32f nosplit; do
    (($(left) > 15)) || break
    f=$w/nh056-$mode-$rep.jsonl
    # shellcheck disable=SC2046  # the mode's switches split on purpose
    env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
      --batch 1 --new-tokens 128 --repeats 3 --prompt-len 32 --roofline-rounds 1 --json \
      >"$f" 2>"$f.err"
    model_summary "$mode" "$f"
  done
done
finish call7
