#!/usr/bin/env bash
# Session 43's sixth call, after the measured defaults (Nemotron-H: all five changes on;
# Qwen3.5: the lookup fold on, its conv and argmax folds off): the fold and model tests under
# the new defaults and the side-download test, then at batch 1 each model with its defaults
# against every change off, and the 0.56B with side downloads (MSTAR_SIDE_DOWNLOAD=1: the
# draws' copy on a second stream), alternated twice. Results in $OUT/call6.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== GPU tests under the new defaults"
timeout 150 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_fold_rules.*:gpu_linear.rms_norm_linear_with_*:gpu_model_fused_norms.*:gpu_model_fused_qkv.*:gpu_model_chained.*:gpu_model_side_download.*:gpu_qwen3_5_fused_norms.*:gpu_model_graphs.*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
  >/dev/null 2>&1
echo "== batch 1 ($((SECONDS - t0)) s)"
switches_of() {  # MODE: defaults (no fold switch set), side (defaults + side downloads), or an envs_of mode
  case $1 in
    defaults) echo "MSTAR_GEMV_CHAIN=late" ;;
    side) echo "MSTAR_SIDE_DOWNLOAD=1" ;;
    *) envs_of "$1" ;;
  esac
}
for rep in 1 2; do
  for run in nh056:defaults nh056:side nh056:none qwen:defaults qwen:none; do
    name=${run%%:*} mode=${run##*:}
    (($(left) > 30)) || break 2
    f=$w/$name-$mode-$rep.jsonl
    # shellcheck disable=SC2046  # the mode's switches split on purpose
    env $(switches_of "$mode") timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/$name" \
      --batch 1 --new-tokens 128 --repeats 3 --prompt-len 32 --json >"$f" 2>"$f.err"
    model_summary "$name-$mode" "$f"
  done
done
finish call6
