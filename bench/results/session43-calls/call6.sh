#!/usr/bin/env bash
# Session 43's sixth call, after the measured defaults (Nemotron-H: all five changes on;
# Qwen3.5: the lookup fold on, its conv and argmax folds off): the fold and model tests under
# the new defaults, then each model at batch 1 with its defaults against every change off,
# alternated twice. Results in $OUT/call6.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== GPU tests under the new defaults"
timeout 150 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_fold_rules.*:gpu_linear.rms_norm_linear_with_*:gpu_model_fused_norms.*:gpu_model_fused_qkv.*:gpu_model_chained.*:gpu_qwen3_5_fused_norms.*:gpu_model_graphs.*:*gpu_overlap*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
  >/dev/null 2>&1
echo "== batch 1: defaults against none ($((SECONDS - t0)) s)"
defaults() { echo "MSTAR_GEMV_CHAIN=late"; }  # no fold switch set: each model's defaults
for rep in 1 2; do
  for name in nh056 qwen; do
    for mode in defaults none; do
      (($(left) > 30)) || break 3
      f=$w/$name-$mode-$rep.jsonl
      # shellcheck disable=SC2046  # the mode's switches split on purpose
      env $(if [[ $mode == none ]]; then envs_of none; else defaults; fi) timeout "$(left)" \
        "$bin/mstar-bench-model-gpu" --model "$ck/$name" --batch 1 --new-tokens 128 --repeats 3 \
        --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$name-$mode" "$f"
    done
  done
done
finish call6
