#!/usr/bin/env bash
# Session 46's sixth call: with the gated norm in the SSD update, the update is the
# Mamba-2 layer's critical chain (~6 us after in_proj ends), so session 44's early reads
# are tried again: the update's slots and states before its chained wait
# (MSTAR_SSD_EARLY=1), the accumulating GEMVs' residual right after their wait
# (MSTAR_GEMV_RESIDUAL_EARLY=1), both; the 0.56B at batch 1, three rounds alternated,
# then the step's timeline with the early update reads. Results in $OUT/call6.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  for mode in defaults early resid earlyresid; do
    (($(left) > 25)) || break
    f=$w/nh056-$mode-$rep.jsonl
    # shellcheck disable=SC2046  # the mode's switches split on purpose
    env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
      --batch 1 --new-tokens 128 --repeats 3 --prompt-len 32 --json >"$f" 2>"$f.err"
    model_summary "$mode" "$f"
  done
done
(($(left) > 40)) && timeline_of early
finish call6
